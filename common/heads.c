/*
 * heads.c - splitting into heads and merging back (introduced in chapter 04).
 * See heads.h.
 *
 * Legend: B = batch_size, T = num_queries (or keys), H = num_heads,
 * D = num_hiddens, d = D / H.
 *
 * The split is d2l's transpose_qkv: reshape, permute, reshape.
 *
 *   x (B, T, D), one sequence b, H = 2, d = 3:
 *
 *        hidden j:  0  1  2 | 3  4  5
 *        token 0:  [a0 a1 a2|a3 a4 a5]        reshape (B, T, H, d):
 *        token 1:  [b0 b1 b2|b3 b4 b5]        the row of each token is cut
 *        token 2:  [c0 c1 c2|c3 c4 c5]        into H pieces of d; no data moves
 *                   head 0    head 1
 *
 *   permute (B, H, T, d), the only step that moves data:
 *
 *        head 0:  [a0 a1 a2]      head 1:  [a3 a4 a5]
 *                 [b0 b1 b2]               [b3 b4 b5]
 *                 [c0 c1 c2]               [c3 c4 c5]
 *
 *   reshape (B*H, T, d): head h of sequence b is matrix b*H + h, a small
 *   (T, d) problem that dot_product_attention solves like any other batch.
 *
 * Both directions are written here as one loop nest that reads the formula
 * off the picture: x[b, t, h*d + i] <-> out[b*H + h, t, i]. The chapter's
 * program does the same with tensor_reshape and tensor_permute, step by step,
 * and checks the two agree.
 */
#include "heads.h"

#include <stdlib.h>

#include "error.h"
#include "memory.h"

bool heads_split(int num_hiddens, int num_heads, const char *hiddens_name,
                 const char *heads_name, char *err, size_t err_len)
{
    if (num_heads >= 1 && num_hiddens % num_heads == 0)
        return true;
    if (err == NULL)
        return false;
    if (num_heads < 1)
        error_format(err, err_len, NULL, "%s %d: a layer needs at least one head", heads_name,
                     num_heads);
    else
        error_format(err, err_len, NULL, "%s %d does not divide by %s %d: every head needs "
                     "the same size", hiddens_name, num_hiddens, heads_name, num_heads);
    return false;
}

int head_size(int num_hiddens, int num_heads)
{
    char why[160];
    if (!heads_split(num_hiddens, num_heads, "num_hiddens", "num_heads", why, sizeof why))
        die("%s", why);
    return num_hiddens / num_heads;
}

/* x (B, T, D) -> out (B*H, T, d) */
Tensor *transpose_qkv(const Tensor *x, int num_heads)
{
    tensor_check_shape("x", x, SHAPE(-1, -1, -1));
    const int B = x->shape[0], T = x->shape[1], D = x->shape[2], H = num_heads;
    const int d = head_size(D, H);

    Tensor *out = tensor_zeros(SHAPE(B * H, T, d));
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++)
            for (int t = 0; t < T; t++) {
                /* head h's d hiddens of token t: one contiguous piece of its row */
                const float *piece = x->data + ((size_t)b * T + t) * D + (size_t)h * d;
                float *head_row = out->data + (((size_t)b * H + h) * T + t) * d;
                for (int i = 0; i < d; i++)
                    head_row[i] = piece[i];
            }
    return out;
}

/* x (B*H, T, d) -> out (B, T, D) */
Tensor *transpose_output(const Tensor *x, int num_heads)
{
    tensor_check_shape("x", x, SHAPE(-1, -1, -1));
    const int H = num_heads, T = x->shape[1], d = x->shape[2];
    if (H < 1)
        die("num_heads must be at least 1, got %d", H);
    if (x->shape[0] % H != 0)
        die("the first size %d of x (batch_size * num_heads) "
            "does not divide by num_heads %d", x->shape[0], H);
    const int B = x->shape[0] / H, D = H * d;

    Tensor *out = tensor_zeros(SHAPE(B, T, D));
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++)
            for (int t = 0; t < T; t++) {
                const float *head_row = x->data + (((size_t)b * H + h) * T + t) * d;
                /* back into place: head h fills hiddens h*d .. h*d + d - 1 */
                float *piece = out->data + ((size_t)b * T + t) * D + (size_t)h * d;
                for (int i = 0; i < d; i++)
                    piece[i] = head_row[i];
            }
    return out;
}

/* ---- backward -------------------------------------------------------------
 * Both maps only move numbers: out[b*H + h, t, i] = x[b, t, h*d + i] and
 * back. Each element lands in exactly one place, so the gradient of an
 * element is the gradient of where it landed, moved back: the backward of
 * a map is the inverse map, with no sum and no rounding. */

/* grad (B*H, T, d) -> grad_x (B, T, D): transpose_qkv's x got its numbers
 * moved to heads, so their gradients move back with transpose_output */
Tensor *transpose_qkv_backward(const Tensor *grad, int num_heads)
{
    return transpose_output(grad, num_heads);
}

/* grad (B, T, D) -> grad_x (B*H, T, d): the inverse, by transpose_qkv */
Tensor *transpose_output_backward(const Tensor *grad, int num_heads)
{
    return transpose_qkv(grad, num_heads);
}

bool kv_heads_split(int num_heads, int num_kv_heads, const char *heads_name,
                    const char *kv_heads_name, char *err, size_t err_len)
{
    if (num_kv_heads >= 1 && num_heads % num_kv_heads == 0)
        return true;
    if (err != NULL)
        error_format(err, err_len, NULL, "%s %d does not divide %s %d: each key-value head "
                     "serves the same number of query heads", kv_heads_name, num_kv_heads,
                     heads_name, num_heads);
    return false;
}

void require_kv_heads(int num_heads, int num_kv_heads)
{
    char why[160];
    if (!kv_heads_split(num_heads, num_kv_heads, "num_heads", "num_kv_heads", why, sizeof why))
        die("%s", why);
}

/* Stop unless G divides H and x (B*heads, T, d) has a first size that
 * divides by heads (G or H, whichever x is split into); returns B. */
static int kv_batch_size(const Tensor *x, int num_kv_heads, int num_heads, int heads)
{
    tensor_check_shape("x", x, SHAPE(-1, -1, -1));
    require_kv_heads(num_heads, num_kv_heads);
    if (x->shape[0] % heads != 0)
        die("the first size %d of x does not divide by its %d heads", x->shape[0],
               heads);
    return x->shape[0] / heads;
}

/* x (B*G, T, d) -> out (B*H, T, d) */
Tensor *repeat_kv_heads(const Tensor *x, int num_kv_heads, int num_heads)
{
    const int B = kv_batch_size(x, num_kv_heads, num_heads, num_kv_heads);
    const int G = num_kv_heads, H = num_heads, group = H / G;
    const size_t head_floats = (size_t)x->shape[1] * x->shape[2];   /* T * d */

    Tensor *out = tensor_zeros(SHAPE(B * H, x->shape[1], x->shape[2]));
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++) {
            /* query head h reads key-value head h / group: the heads
             * 0 .. group-1 share head 0, the next group head 1, ... */
            const float *kv_head = x->data + ((size_t)b * G + h / group) * head_floats;
            float *copy = out->data + ((size_t)b * H + h) * head_floats;
            for (size_t i = 0; i < head_floats; i++)
                copy[i] = kv_head[i];
        }
    return out;
}

/* grad (B*H, T, d) -> grad_x (B*G, T, d): each key-value head was read by
 * H / G query heads, so its gradient is the sum of theirs, in head order */
Tensor *repeat_kv_heads_backward(const Tensor *grad, int num_kv_heads, int num_heads)
{
    const int B = kv_batch_size(grad, num_kv_heads, num_heads,
                                num_heads);
    const int G = num_kv_heads, H = num_heads, group = H / G;
    const size_t head_floats = (size_t)grad->shape[1] * grad->shape[2];   /* T * d */

    Tensor *out = tensor_zeros(SHAPE(B * G, grad->shape[1], grad->shape[2]));
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++) {
            const float *copy_grad = grad->data + ((size_t)b * H + h) * head_floats;
            float *kv_grad = out->data + ((size_t)b * G + h / group) * head_floats;
            for (size_t i = 0; i < head_floats; i++)
                kv_grad[i] += copy_grad[i];
        }
    return out;
}

/* x (B, K, G*d) -> (B*H, K, d) */
Tensor *split_kv_heads(const Tensor *x, int num_kv_heads, int num_heads)
{
    Tensor *kv_heads = transpose_qkv(x, num_kv_heads);   /* (B*G, K, d) */
    if (num_kv_heads == num_heads)
        return kv_heads;
    Tensor *repeated = repeat_kv_heads(kv_heads, num_kv_heads, num_heads);
    tensor_free(kv_heads);
    return repeated;
}

/* grad (B*H, K, d) -> grad_x (B, K, G*d): the two steps backwards */
Tensor *split_kv_heads_backward(const Tensor *grad, int num_kv_heads, int num_heads)
{
    if (num_kv_heads == num_heads)
        return transpose_qkv_backward(grad, num_heads);
    Tensor *grad_kv_heads = repeat_kv_heads_backward(grad, num_kv_heads, num_heads);
    Tensor *grad_x = transpose_qkv_backward(grad_kv_heads, num_kv_heads);
    tensor_free(grad_kv_heads);
    return grad_x;
}

/* valid_lens (B,) -> (B*H,), or (B, T) -> (B*H, T) */
ValidLens *valid_lens_repeat_interleave(const ValidLens *valid_lens, int num_heads)
{
    if (valid_lens == NULL)
        return NULL;   /* no mask stays no mask */
    const int H = num_heads, B = valid_lens->shape[0];
    if (H < 1)
        die("num_heads must be at least 1, got %d", H);
    const int per_row = valid_lens->ndim == 2 ? valid_lens->shape[1] : 1;

    /* Row b*H + h is head h of sequence b, so sequence b's lengths are
     * copied H times in a row: [3, 2] -> [3, 3, 2, 2] for H = 2. Tiling
     * instead ([3, 2, 3, 2]) would give head 1 of sequence 0 the mask of
     * sequence 1. */
    int *lens = checked_malloc((size_t)B * H * per_row, sizeof(int));
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++)
            for (int q = 0; q < per_row; q++)
                lens[((size_t)b * H + h) * per_row + q] = valid_lens->data[(size_t)b * per_row + q];

    ValidLens *out = valid_lens->ndim == 2 ? valid_lens_2d(lens, B * H, per_row)
                                           : valid_lens_1d(lens, B * H);
    free(lens);
    return out;
}
