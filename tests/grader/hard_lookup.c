/* hard_lookup.c - grades exercise 1.3, the dictionary as attention: the key
 * that matches the query best. The reference is the argmax of matmul_bt's
 * scores (common/ops.c), the first on a tie. Half the cases are the
 * dictionary itself, one-hot keys and a one-hot query that may match none. */
#include "exercises.h"
#include "grader.h"
#include "ops.h"

#include <math.h>
#include <stdlib.h>

static void one_hot(float *row, int size, int i)
{
    for (int j = 0; j < size; j++)
        row[j] = j == i ? 1.0f : 0.0f;
}

static void swap_rows(float *rows, int d, int a, int b)
{
    for (int p = 0; p < d; p++) {
        float t = rows[(size_t)a * d + p];
        rows[(size_t)a * d + p] = rows[(size_t)b * d + p];
        rows[(size_t)b * d + p] = t;
    }
}

static void grade_case(Rng *rng, int index)
{
    int num_keys = index == 0 ? 1 : draw_size(rng, index, 100, 1, 6);
    int d = index == 1 ? 1 : draw_size(rng, index, 100, 1, 7);
    bool dictionary = index % 2 == 0;
    /* every tenth case (from 3), every key points away from the query: all
     * scores are at most 0, and key 0 need not be the best */
    bool away = index % 10 == 3;
    if (away && num_keys < 3)
        num_keys = 3;
    if (dictionary && d < num_keys + 1)
        d = num_keys + 1;   /* room for a word that is no key */
    case_describe("n_k = %d, d = %d, %s", num_keys, d,
                  dictionary ? "one-hot keys and query (a dictionary)"
                  : away     ? "real-valued vectors, every key pointing away from the query"
                             : "real-valued vectors");
    Tensor *query = draw_normal(rng, 1.0f, SHAPE(1, d));
    Tensor *keys = draw_normal(rng, 1.0f, SHAPE(num_keys, d));
    if (dictionary) {
        /* key j is word perm[j]; the query is any word, a key or not */
        int *perm = checked_malloc((size_t)d, sizeof(int));
        rng_permutation(rng, perm, d);
        for (int j = 0; j < num_keys; j++)
            one_hot(keys->data + (size_t)j * d, d, perm[j]);
        one_hot(query->data, d, (int)rng_below(rng, (uint32_t)d));
        free(perm);
    }
    if (away) {
        /* every key turned to score at most 0, the keys ordered by score, then
         * the two lowest swapped: key 0 is neither the best nor the lowest */
        float *dots = checked_malloc((size_t)num_keys, sizeof(float));
        for (int j = 0; j < num_keys; j++) {
            float *key = keys->data + (size_t)j * d;
            dots[j] = 0.0f;
            for (int p = 0; p < d; p++)
                dots[j] += query->data[p] * key[p];
            for (int p = 0; dots[j] > 0.0f && p < d; p++)
                key[p] = -key[p];
            dots[j] = -fabsf(dots[j]);
        }
        for (int j = 0; j < num_keys; j++)
            for (int k = j + 1; k < num_keys; k++)
                if (dots[k] < dots[j]) {
                    swap_rows(keys->data, d, j, k);
                    float t = dots[j];
                    dots[j] = dots[k];
                    dots[k] = t;
                }
        swap_rows(keys->data, d, 0, 1);
        free(dots);
    }
    case_input("query", query);
    case_input("keys", keys);

    Tensor *scores = case_keep(matmul_bt(query, keys));
    int expected = 0;
    for (int j = 1; j < num_keys; j++)
        if (scores->data[j] > scores->data[expected])
            expected = j;

    case_calling();
    int got = my_hard_lookup(query->data, keys->data, num_keys, d);
    case_called();

    expect_that(got >= 0 && got < num_keys, 1, "your lookup returned %d, not a key index 0..%d",
                got, num_keys - 1);
    /* a best that starts at 0, not at key 0's score: no negative score beats
     * it, so when every score is below 0 the lookup keeps key 0 (named only
     * where key 0 is not the lowest, which the largest |score| would pick) */
    bool all_negative = scores->data[expected] < 0.0f, key0_lowest = true;
    for (int j = 1; j < num_keys; j++)
        key0_lowest = key0_lowest && scores->data[0] <= scores->data[j];
    expect_that(!(got == 0 && expected != 0 && all_negative && !key0_lowest), 2,
                "your lookup returned key 0 (score %.6g), but key %d scores %.6g, more; every "
                "score here is below 0: does your best start at 0 instead of at key 0's score?",
                (double)scores->data[0], expected, (double)scores->data[expected]);
    expect_that(scores->data[got] >= scores->data[expected], 2,
                "your lookup returned key %d, whose dot product with the query is %.6g; key %d "
                "has %.6g", got, (double)scores->data[got], expected,
                (double)scores->data[expected]);
    expect_that(got == expected, 3,
                "your lookup returned key %d; keys %d and %d tie, and the first one wins", got,
                expected, got);
}

const Exercise exercise = {"hard_lookup", "01_dot_product", "1.3", 100, grade_case,
                           "matmul_bt matmul_bt_raw", NULL};
