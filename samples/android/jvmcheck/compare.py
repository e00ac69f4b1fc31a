"""What the app's Kotlin read from an assets folder (SpecCheck.kt's JSON) against Python's
reading of the same spec (contract.py): equal, or exit 1 naming the difference."""
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import contract  # noqa: E402


def main(assets: str, kotlin_json: str) -> int:
    assets = Path(assets)
    spec = contract.load_spec(assets)
    kotlin = json.loads(Path(kotlin_json).read_text())
    problems = []
    for screen in ("camera", "personalization"):
        s, k = spec[screen], kotlin[screen]
        python = {key: {side: [[n, t["shape"], t["dtype"]] for n, t in sig[side].items()]
                        for side in ("inputs", "outputs")} for key, sig in s["signatures"].items()}
        labels = (assets / s["labels"]).read_text().split()
        for field, ours, theirs in (("model", s["model"], k["model"]),
                                    ("signatures", python, k["signatures"]),
                                    ("mean", s["image"]["mean"], k["mean"]),
                                    ("std", s["image"]["std"], k["std"]),
                                    ("labels", labels, k["labels"])):
            if ours != theirs:
                problems.append(f"{screen} {field}: Python {ours} != Kotlin {theirs}")
    p = spec["personalization"]
    for field in ("keys", "batch_size", "steps"):
        if p[field] != kotlin["personalization"][field]:
            problems.append(f"personalization {field}: {p[field]} != "
                            f"{kotlin['personalization'][field]}")
    pad = np.arange(256 * 256)
    gray = (((pad % 256) * 7 + (pad // 256) * 3) % 256).reshape(256, 256).astype(np.uint8)
    app = contract.Personalizer(assets, spec, contract.interpreter_class("edgelite"))
    ours = app.preprocess(gray).reshape(-1)
    theirs = np.array(kotlin["pad"], np.float32)
    if ours.shape != theirs.shape or np.abs(ours - theirs).max() > 1e-6:
        problems.append(f"pad preprocessing differs: max |diff| "
                        f"{np.abs(ours - theirs).max() if ours.shape == theirs.shape else 'shape'}")
    for line in problems:
        print(f"jvmcheck: {line}", file=sys.stderr)
    if not problems:
        print(f"jvmcheck: the Kotlin reads the spec as Python does ({len(spec['camera'])} camera "
              f"and {len(p)} personalization fields; pad preprocessing equal)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
