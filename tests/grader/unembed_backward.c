/* unembed_backward.c - grades exercise 6.16, the backward of the tied
 * unembedding (06_permutation_invariance/your_gpt.md), against
 * unembed_backward (common/learn/embedding.c) on the clear layer. grad_wte
 * holds the embedding's part before the call: the two are added. */
#include "exercises.h"
#include "grader.h"
#include "learn/embedding.h"

#include <math.h>
#include <string.h>

static void grade_case(Rng *rng, int index)
{
    int R = index == 0 ? 1 : draw_size(rng, index, 100, 1, 5);
    int D = index == 1 ? 1 : large_case(index, 100) ? draw_int(rng, 100, 300)
                                                     : draw_size(rng, index, 100, 1, 7);
    int V = index == 2 ? 2 : draw_size(rng, index, 100, 2, 9);
    case_describe("h (R = %d, D = %d), wte (V = %d, D = %d)", R, D, V, D);
    const Tensor *h = case_input("h", draw_normal(rng, 1.0f, SHAPE(R, D)));
    const Tensor *wte = case_input("wte", draw_normal(rng, 1.0f, SHAPE(V, D)));
    const Tensor *grad_logits = case_input("grad_logits",
                                           draw_normal(rng, 1.0f, SHAPE(R, V)));
    Tensor *held = case_input("grad_wte (before)", draw_normal(rng, 1.0f, SHAPE(V, D)));
    const LanguageKernels clear = CLEAR_LANGUAGE_KERNELS;
    Tensor *want_wte = case_keep(tensor_copy(held));
    Tensor *want_h = case_keep(unembed_backward(&clear, h, wte, grad_logits, want_wte));

    float *got_h = case_output("grad_h", (size_t)R * D);
    float *got_wte = case_output("grad_wte", (size_t)V * D);
    memcpy(got_wte, held->data, held->size * sizeof(float));
    case_calling();
    my_unembed_backward(h->data, wte->data, grad_logits->data, R, D, V, got_h, got_wte);
    case_called();

    bool overwritten = true;   /* grad_wte = this part alone */
    for (size_t i = 0; i < held->size && overwritten; i++)
        overwritten = fabs(got_wte[i] - (want_wte->data[i] - held->data[i])) <=
                      1e-5 * (fabs(want_wte->data[i]) + 1);
    expect_that(!overwritten, 3, "grad_wte holds the unembedding's part alone: wte is used "
                "twice (the embedding and the unembedding), so its gradient is the SUM of "
                "both, added into what grad_wte holds");
    expect_close_floats("grad_h", want_h->data, got_h, SHAPE(R, D), 1e-5, 1e-5, 1);
    expect_close_floats("grad_wte", want_wte->data, got_wte, SHAPE(V, D), 1e-5, 1e-5, 2);
}

const Exercise exercise = {"unembed_backward", "06_permutation_invariance", "6.16", 100,
                           grade_case, "unembed_backward linear_backward",
                           "your_gpt.md"};
