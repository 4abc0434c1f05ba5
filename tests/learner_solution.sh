#!/usr/bin/env bash
# A learner's own program, as the top README describes it: a file
# 02_softmax_mask/my_solution.c with a plain int main.
#   - plain make builds it as ./02_softmax_mask/my_solution, and it runs;
#   - the tests that run every program run the repository's own only, so
#     they pass with it present;
#   - with --sanitize, make sanitize passes with it present: the sanitizer
#     build compiles it too (make all), and the tests and the programs it
#     runs are the repository's own;
#   - once the file is deleted, make clean removes its binary too.
# Ends with make clean (CI runs it right after the clang build, and again
# with --sanitize as its sanitizer step).
set -euo pipefail
cd "$(dirname "$0")/.."

sanitize=false
case "${1-}" in
    "") ;;
    --sanitize) sanitize=true ;;
    *) echo "usage: tests/learner_solution.sh [--sanitize]" >&2; exit 2 ;;
esac

src=02_softmax_mask/my_solution.c
program=02_softmax_mask/my_solution
fail() { echo "learner_solution: $*" >&2; exit 1; }
[ ! -e "$src" ] && [ ! -e "$program" ] || fail "$src or $program exists already: move it away first"
trap 'rm -f "$src"' EXIT

cat >"$src" <<'SOLUTION'
#include "softmax.h"
#include "tensor.h"

int main(void)
{
    Tensor *x = tensor_from((const float[]){1, 2, 3}, SHAPE(1, 3));
    Tensor *w = softmax(x);
    tensor_print_named("w", w);
    tensor_free(w);
    tensor_free(x);
    return 0;
}
SOLUTION

make -j2 all tests/run_tests >/dev/null
[ "$(./$program)" = "w = tensor([[0.0900, 0.2447, 0.6652]])" ] || fail "$program printed something else"
grep -qx "$program" build/programs.txt && fail "$program is in the tests' list of programs"
./tests/run_tests --filter 'output/*' >/dev/null 2>&1 || fail "the output tests fail with $src present"
./tests/run_tests --filter 'every_program/*' >/dev/null 2>&1 \
    || fail "the every-program test fails with $src present"

if $sanitize; then
    make sanitize >/dev/null || fail "make sanitize fails with $src present"
    [ -x "build/sanitize/$program" ] || fail "make sanitize did not build $program"
    [ "$(ASAN_OPTIONS=detect_leaks=1 "./build/sanitize/$program")" = \
      "w = tensor([[0.0900, 0.2447, 0.6652]])" ] || fail "the sanitizer build of $program failed"
fi

rm -f "$src"
make clean >/dev/null
[ ! -e "$program" ] || fail "make clean left $program behind after $src was deleted"
[ ! -e "build/sanitize/$program" ] || fail "make clean left build/sanitize/$program behind"
echo "learner_solution: my_solution built, left out of the every-program tests," \
     "$($sanitize && echo "make sanitize passes with it, ")removed by make clean"
