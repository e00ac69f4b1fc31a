"""Cases for NON_MAX_SUPPRESSION_V4 and V5 (see test_ops.py): overlapping clusters, equal scores,
flipped and empty boxes, thresholds, soft-NMS sigmas, max_output_size above and below the
number of boxes and as a graph input."""
import numpy as np

from tests.opmodel import In, Out, case

rng = np.random.default_rng(21)


def clustered_boxes(n, clusters=4):
    centers = rng.random((clusters, 2)) * 8
    c = centers[rng.integers(0, clusters, n)] + rng.standard_normal((n, 2)) * 0.4
    hw = 0.5 + rng.random((n, 2)) * 1.5
    boxes = np.concatenate([c - hw / 2, c + hw / 2], axis=1)
    return boxes.astype(np.float32)


def scores(n, ties=False):
    s = rng.random(n).astype(np.float32)
    if ties:
        s = np.round(s * 4) / 4  # many equal scores: the heap's order decides
    return s.astype(np.float32)


def v4(name, b, s, max_out, iou, score_t):
    return case(name, "NON_MAX_SUPPRESSION_V4",
                [In(b.shape), In(s.shape), np.int32(max_out), np.float32(iou),
                 np.float32(score_t)], [b, s], outputs=[Out(dtype="int32"), Out(dtype="int32")])


def v5(name, b, s, max_out, iou, score_t, sigma):
    return case(name, "NON_MAX_SUPPRESSION_V5",
                [In(b.shape), In(s.shape), np.int32(max_out), np.float32(iou),
                 np.float32(score_t), np.float32(sigma)], [b, s],
                outputs=[Out(dtype="int32"), Out(), Out(dtype="int32")])


CASES = []
for k, (n, max_out, iou, score_t, ties) in enumerate(((30, 10, 0.5, 0.0, False),
                                                      (30, 40, 0.3, 0.2, False),
                                                      (50, 20, 0.6, 0.1, True),
                                                      (12, 5, 0.0, 0.0, False),
                                                      (20, 8, 1.0, 0.5, True),
                                                      (25, 0, 0.5, 0.0, False))):
    b, s = clustered_boxes(n), scores(n, ties)
    CASES.append(v4(f"non_max_suppression_v4_{k}", b, s, max_out, iou, score_t))
    for sigma in (0.0, 0.5, 2.0):
        CASES.append(v5(f"non_max_suppression_v5_{k}_sigma{sigma}", b, s, max_out, iou, score_t,
                        sigma))

# Corners given in either order, empty boxes (zero area: never suppress nor suppressed), all
# scores below the threshold.
b = clustered_boxes(10)
b[::2] = b[::2][:, [2, 3, 0, 1]]
b[3, 2:] = b[3, :2]
s = scores(10)
CASES.append(v4("non_max_suppression_v4_flipped_and_empty", b, s, 10, 0.4, 0.0))
CASES.append(v5("non_max_suppression_v5_flipped_and_empty", b, s, 10, 0.4, 0.0, 0.3))
CASES.append(v4("non_max_suppression_v4_none_above_threshold", b, s, 5, 0.5, 2.0))

# max_output_size as a graph input: the outputs' length is known only at run time.
b, s = clustered_boxes(20), scores(20)
CASES.append(case("non_max_suppression_v4_size_input", "NON_MAX_SUPPRESSION_V4",
                  [In(b.shape), In(s.shape), In((), "int32"), np.float32(0.5), np.float32(0.0)],
                  [b, s, np.int32(6)], outputs=[Out((6,), "int32"), Out(dtype="int32")]))
CASES.append(case("non_max_suppression_v5_size_input", "NON_MAX_SUPPRESSION_V5",
                  [In(b.shape), In(s.shape), In((), "int32"), np.float32(0.5), np.float32(0.1),
                   np.float32(0.5)],
                  [b, s, np.int32(7)], outputs=[Out((7,), "int32"), Out((7,)),
                                                Out(dtype="int32")]))
