#!/usr/bin/env bash
# Compile the app's Kotlin (app/src/main/java) with the real Kotlin compiler against stubs of the
# Android, AndroidX, CameraX and LiteRT APIs it calls (stubs/: the signatures as those libraries
# declare them, bodies empty; org.json is Android's own implementation, Debian's
# libandroid-json-java), then run SpecCheck.kt on the JVM: the app's AppSpec, TextDirection and
# Personalizer read an assets folder, and what they read is compared with Python's reading of
# the same spec (same names, shapes, dtypes, order, normalization, labels; the pad's
# preprocessing equal to contract.py's).
#
#   bash samples/android/jvmcheck/run.sh ASSETS_DIR     (a folder make_assets.py wrote)
#
# Needs java/javac (17+), npm (the compiler is npm's kotlin-compiler 2.4.20 package, cached in
# ~/.cache/edgelite-kotlinc), Debian's libandroid-json-java, and Python with edgelite.
# This checks the Kotlin's syntax and types against the stubs, not against the real libraries,
# and runs no inference (the stub interpreter does nothing): the Python tests do that part.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ASSETS=$(cd "${1:?usage: run.sh ASSETS_DIR}" && pwd)
CACHE=${EDGELITE_KOTLINC_CACHE:-$HOME/.cache/edgelite-kotlinc}
JSON_JAR=/usr/share/java/com.android.json.jar
KOTLINC="$CACHE/package/bin/kotlinc"
if [ ! -x "$KOTLINC" ]; then
    mkdir -p "$CACHE"
    (cd "$CACHE" && npm pack -q kotlin-compiler@2.4.20 >/dev/null && tar xzf kotlin-compiler-2.4.20.tgz \
        && rm kotlin-compiler-2.4.20.tgz && chmod +x package/bin/*)
fi
[ -f "$JSON_JAR" ] || { echo "needs $JSON_JAR: apt-get install libandroid-json-java" >&2; exit 2; }
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
javac -d "$WORK/stubs" $(find "$HERE/stubs" -name '*.java')
"$KOTLINC" -jvm-target 17 -Werror -cp "$WORK/stubs:$JSON_JAR" -d "$WORK/app.jar" \
    "$HERE"/../app/src/main/java/dev/edgelite/android/*.kt "$HERE/SpecCheck.kt"
echo "jvmcheck: the app's Kotlin compiles (kotlinc 2.4.20, -Werror)" >&2
java -Dassets.dir="$ASSETS" -cp "$WORK/app.jar:$WORK/stubs:$JSON_JAR:$CACHE/package/lib/kotlin-stdlib.jar" \
    dev.edgelite.android.SpecCheckKt "$WORK" > "$WORK/kotlin.json"
python3 "$HERE/compare.py" "$ASSETS" "$WORK/kotlin.json"
