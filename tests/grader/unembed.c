/* unembed.c - grades exercise 6.15, the tied unembedding
 * (06_permutation_invariance/your_gpt.md), against unembed
 * (common/learn/embedding.c) on the clear layer. V differs from D in most
 * cases, so reading wte as (D, V) shows. */
#include "exercises.h"
#include "grader.h"
#include "learn/embedding.h"

#include <math.h>

static void grade_case(Rng *rng, int index)
{
    int R = index == 0 ? 1 : draw_size(rng, index, 100, 1, 5);
    int D = index == 1 ? 1 : large_case(index, 100) ? draw_int(rng, 100, 300)
                                                     : draw_size(rng, index, 100, 1, 7);
    int V = index == 2 ? 2 : draw_size(rng, index, 100, 2, 9);
    case_describe("h (R = %d, D = %d), wte (V = %d, D = %d)", R, D, V, D);
    const Tensor *h = case_input("h", draw_normal(rng, 1.0f, SHAPE(R, D)));
    const Tensor *wte = case_input("wte", draw_normal(rng, 1.0f, SHAPE(V, D)));
    const LanguageKernels clear = CLEAR_LANGUAGE_KERNELS;
    Tensor *want = case_keep(unembed(&clear, h, wte));
    float *got = case_output("logits", (size_t)R * V);
    case_calling();
    my_unembed(h->data, wte->data, R, D, V, got);
    case_called();

    // the slip: wte read as if it were (D, V), logits[r][v] = sum_j h[r][j] wte_flat[j V + v]
    bool transposed = D > 1;   /* with D = 1 both readings agree */
    for (int r = 0; r < R && transposed; r++)
        for (int v = 0; v < V && transposed; v++) {
            double sum = 0.0;
            for (int j = 0; j < D; j++)
                sum += (double)AT2(h, r, j) * wte->data[(size_t)j * V + v];
            transposed = fabs(got[(size_t)r * V + v] - sum) <= 1e-4 * (fabs(sum) + 1e-2);
        }
    expect_that(!transposed, 2, "logits read wte as a (D, V) matrix: wte is (V, D), one row "
                "per token, and logits[r][v] is the dot product of h's row r with wte's row v");
    expect_close_floats("logits", want->data, got, SHAPE(R, V), 1e-5, 1e-5, 1);
}

const Exercise exercise = {"unembed", "06_permutation_invariance", "6.15", 100, grade_case,
                           "unembed linear linear_output matmul_bt matmul_bt_raw",
                           "your_gpt.md"};
