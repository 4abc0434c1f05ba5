/* multihead_forward.c - grades exercise 5.2, the multi-head layer's forward
 * from the repository's pieces, against multihead_forward
 * (common/multihead.c) in evaluation mode. A result that matches the layer
 * with scores divided by sqrt(D) instead of sqrt(d) is named. */
#include "exercises.h"
#include "grader.h"

#include <math.h>

static void grade_case(Rng *rng, int index)
{
    int batch = index < 2 ? 1 : draw_size(rng, index, 120, 1, 3);
    int num_queries = index == 0 ? 1 : draw_size(rng, index, 120, 1, 4);
    int num_keys = index == 1 ? 1 : draw_size(rng, index, 120, 1, 5);
    /* H = 1 once, then 2 to 4 heads of an odd or even size d */
    int H = index == 2 ? 1 : draw_int(rng, 2, 4), d = draw_size(rng, index, 120, 1, 3);
    int D = H * d, Dq = draw_int(rng, 1, 5), Dk = draw_int(rng, 1, 5), Dv = draw_int(rng, 1, 5);
    bool bias = index % 2 == 0;
    int kind = index % 3;   /* 0: no mask, 1: 1-D, 2: 2-D */
    case_describe("B = %d, T = %d, n_k = %d, Dq = %d, Dk = %d, Dv = %d, D = %d, H = %d (d = "
                  "%d), bias %s, valid_lens %s", batch, num_queries, num_keys, Dq, Dk, Dv, D, H,
                  d, bias ? "on" : "off", kind == 0 ? "None" : kind == 1 ? "1-D" : "2-D");
    MultiHeadAttention *layer = multihead_new(Dq, Dk, Dv, D, H, 0.0f, bias, rng);
    /* weights a few times larger than nn.Linear's, so the scores matter */
    Tensor *params[] = {layer->W_q, layer->W_k, layer->W_v, layer->W_o};
    for (int i = 0; i < 4; i++) {
        for (size_t j = 0; j < params[i]->size; j++)
            params[i]->data[j] *= 3.0f;
        case_input(i == 0 ? "W_q" : i == 1 ? "W_k" : i == 2 ? "W_v" : "W_o", params[i]);
    }
    if (bias) {
        case_input("b_q", layer->b_q);
        case_input("b_k", layer->b_k);
        case_input("b_v", layer->b_v);
        case_input("b_o", layer->b_o);
    }
    const Tensor *queries =
        case_input("queries", draw_normal(rng, 1.0f, SHAPE(batch, num_queries, Dq)));
    const Tensor *keys = case_input("keys", draw_normal(rng, 1.0f, SHAPE(batch, num_keys, Dk)));
    const Tensor *values =
        case_input("values", draw_normal(rng, 1.0f, SHAPE(batch, num_keys, Dv)));
    const ValidLens *valid_lens = case_valid_lens(
        "valid_lens",
        kind == 0 ? NULL : draw_valid_lens(rng, batch, num_queries, num_keys, kind == 2));

    Tensor *expected =
        case_keep(multihead_forward(layer, queries, keys, values, valid_lens, false, NULL, NULL));
    case_calling();
    Tensor *got = case_keep(my_multihead_forward(layer, queries, keys, values, valid_lens));
    case_called();

    expect_tensor("output", got, SHAPE(batch, num_queries, D), 1);
    expect_finite("output", got, 2);
    if (H > 1 && !tensor_allclose(got, expected, 1e-4f, 1e-4f, NULL)) {
        /* the layer as it would be with scores over sqrt(D): queries scaled
         * by sqrt(d / D) before the product */
        float shrink = sqrtf((float)d / (float)D);
        MultiHeadAttention wrong = *layer;
        wrong.W_q = case_keep(tensor_copy(layer->W_q));
        for (size_t j = 0; j < wrong.W_q->size; j++)
            wrong.W_q->data[j] *= shrink;
        if (bias) {
            wrong.b_q = case_keep(tensor_copy(layer->b_q));
            for (size_t j = 0; j < wrong.b_q->size; j++)
                wrong.b_q->data[j] *= shrink;
        }
        Tensor *by_D = case_keep(
            multihead_forward(&wrong, queries, keys, values, valid_lens, false, NULL, NULL));
        expect_that(!tensor_allclose(got, by_D, 1e-4f, 1e-4f, NULL), 2,
                    "your output is the layer's with scores divided by sqrt(D) = sqrt(%d); "
                    "each head's scores are divided by sqrt(d), d = D / H = %d", D, d);
    }
    /* D terms in each output, after two projections: 1e-4 absolute */
    expect_close("output", expected, got, 1e-4, 1e-4, 3);
    layer->W_q = layer->W_k = layer->W_v = layer->W_o = NULL;   /* freed with the case */
    layer->b_q = layer->b_k = layer->b_v = layer->b_o = NULL;
    multihead_free(layer);
}

const Exercise exercise = {"multihead_forward", "05_multihead", "5.2", 120, grade_case,
                           "multihead_forward multihead_forward_cache fast_multihead_forward", NULL};
