#!/usr/bin/env bash
# A learner's own program, as the top README describes it: a file
# 02_softmax_mask/my_solution.c with a plain int main.
#   - plain make builds it as ./02_softmax_mask/my_solution, and it runs,
#     though it has an unused variable: a learner's file is built with its
#     warnings shown, not as errors (even with WERROR=1, which makes the
#     repository's own warnings errors);
#   - the tests that run every program run the repository's own only, so
#     they pass with it present;
#   - with --sanitize, make sanitize passes with it present: the sanitizer
#     build compiles it too (make all), and the tests and the programs it
#     runs are the repository's own;
#   - once the file is deleted, make clean removes its binary too;
#   - chapter 03's exercise 1, done as its README asks (main.c copied and
#     its tokens divided by their length), builds the same way and runs to
#     the end: the self-check sees the tokens changed on purpose, says it
#     skips the comparison with the PyTorch example, and exits 0, and every
#     token attends most to itself.
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
exercise_src=03_self_attention/my_exercise_1.c
exercise=03_self_attention/my_exercise_1
fail() { echo "learner_solution: $*" >&2; exit 1; }
for f in "$src" "$program" "$exercise_src" "$exercise"; do
    [ ! -e "$f" ] || fail "$f exists already: move it away first"
done
trap 'rm -f "$src" "$exercise_src"' EXIT

cat >"$src" <<'SOLUTION'
#include "softmax.h"
#include "tensor.h"

int main(void)
{
    int unused = 0;
    Tensor *x = tensor_from((const float[]){1, 2, 3}, SHAPE(1, 3));
    Tensor *w = softmax(x);
    tensor_print_named("w", w);
    tensor_free(w);
    tensor_free(x);
    return 0;
}
SOLUTION

# Exercise 1 of chapter 03: make_tokens() as written becomes make_raw_tokens(),
# and a make_tokens() that divides every token by its length takes its place.
perl -0pe 's/static Tensor \*make_tokens\(/static Tensor *make_raw_tokens(/;
  s/(static Tensor \*make_raw_tokens\(.*?\n\}\n)/$1
static Tensor *make_tokens(const Options *opt, Rng *rng)
{
    Tensor *x = make_raw_tokens(opt, rng);
    const int n = x->shape[1], d = x->shape[2];
    for (int i = 0; i < n; i++) {
        float *token = x->data + (size_t)i * d;
        double squares = 0.0;
        for (int k = 0; k < d; k++)
            squares += (double)token[k] * token[k];
        for (int k = 0; k < d; k++)
            token[k] = (float)(token[k] \/ sqrt(squares));
    }
    return x;
}
/s' 03_self_attention/main.c >"$exercise_src"
grep -q 'make_raw_tokens(opt, rng)' "$exercise_src" || fail "could not edit make_tokens() into $exercise_src"

warnings=$(make -j2 all tests/run_tests 2>&1 >/dev/null) || fail "make stops at $src: $warnings"
grep -q "unused variable" <<<"$warnings" || fail "make did not show the warning in $src"
[ "$(./$program)" = "w = tensor([[0.0900, 0.2447, 0.6652]])" ] || fail "$program printed something else"
grep -qx "$program" build/programs.txt && fail "$program is in the tests' list of programs"
./tests/run_tests --filter 'output/*' >/dev/null 2>&1 || fail "the output tests fail with $src present"
./tests/run_tests --filter 'every_program/*' >/dev/null 2>&1 \
    || fail "the every-program test fails with $src present"

out=$(./$exercise) || fail "$exercise (chapter 03's exercise 1) stopped with status $?"
grep -q "is not compared with what the PyTorch example printed" <<<"$out" \
    || fail "$exercise does not say it skips the comparison with the PyTorch example"
for args in "" "--tokens 6 --dim 4 --seed 1" "--tokens 6 --dim 4 --seed 2" \
            "--tokens 6 --dim 4 --seed 3"; do
    # shellcheck disable=SC2086
    out=$(./$exercise $args) || fail "$exercise $args stopped with status $?"
    ! grep -q "attends most to" <<<"$out" \
        || fail "$exercise $args: a normalised token attends most to another token"
done
grep -qx "$exercise" build/programs.txt && fail "$exercise is in the tests' list of programs"

if $sanitize; then
    make sanitize >/dev/null || fail "make sanitize fails with $src present"
    [ -x "build/sanitize/$program" ] || fail "make sanitize did not build $program"
    [ "$(ASAN_OPTIONS=detect_leaks=1 "./build/sanitize/$program")" = \
      "w = tensor([[0.0900, 0.2447, 0.6652]])" ] || fail "the sanitizer build of $program failed"
fi

rm -f "$src" "$exercise_src"
make clean >/dev/null
[ ! -e "$program" ] || fail "make clean left $program behind after $src was deleted"
[ ! -e "$exercise" ] || fail "make clean left $exercise behind after $exercise_src was deleted"
[ ! -e "build/sanitize/$program" ] || fail "make clean left build/sanitize/$program behind"
echo "learner_solution: my_solution and chapter 03's exercise 1 built, left out of the" \
     "every-program tests, $($sanitize && echo "make sanitize passes with them, ")removed by make clean"
