/*
 * heads.h - splitting into heads and merging back (introduced in chapter 04).
 *
 * Legend: B = batch_size, T = num_queries (or keys), H = num_heads,
 * D = num_hiddens, d = D / H (an error if H does not divide D).
 *
 *   transpose_qkv     (B, T, D) -> (B, T, H, d) -> (B, H, T, d) -> (B*H, T, d)
 *   transpose_output  (B*H, T, d) -> (B, H, T, d) -> (B, T, H, d) -> (B, T, D)
 *
 * Row b * H + h of the (B*H, ...) result is head h of sequence b: the order
 * of torch.repeat_interleave and of PyTorch's own multi-head attention.
 */
#ifndef HEADS_H
#define HEADS_H

#include <stdbool.h>
#include <stddef.h>

#include "valid_lens.h"
#include "tensor.h"

/* ---- the one rule of the sizes -----------------------------------------------
 * H heads split D hiddens when H >= 1 and H divides D: every head gets the
 * same size d = D / H. This is the one check of that rule; the layer's
 * constructors, the loaders and the programs all ask it.
 *
 * heads_split: true when num_heads splits num_hiddens. When not, false,
 * and err (when not NULL; err_len bytes) gets the one message, the two
 * sizes named as the caller's reader knows them (a flag, a size read from a
 * file); with err NULL the names are not read:
 *   heads_split(100, 3, "--hiddens", "--heads", err, sizeof err) is false:
 *   "--hiddens 100 does not divide by --heads 3: every head needs the same size"
 * head_size: d = D / H for a caller whose sizes were checked before (the
 * layer, the head split); when H does not split D that is a bug, and it
 * dies with the same message (error.h). */
bool heads_split(int num_hiddens, int num_heads, const char *hiddens_name,
                 const char *heads_name, char *err, size_t err_len);
int head_size(int num_hiddens, int num_heads);

Tensor *transpose_qkv(const Tensor *x, int num_heads);
Tensor *transpose_output(const Tensor *x, int num_heads);
/* The backwards of the two index maps are each other's maps: a gradient
 * moves back to where its value came from, and nothing is added, since
 * every element goes to exactly one place. */
Tensor *transpose_qkv_backward(const Tensor *grad, int num_heads);     /* (B*H, T, d) -> (B, T, D) */
Tensor *transpose_output_backward(const Tensor *grad, int num_heads);  /* (B, T, D) -> (B*H, T, d) */

/* The one check of the groups, as heads_split is of the heads: G >= 1 key-
 * value heads divide H, each serving the same number of query heads.
 * kv_heads_split: true when they do; when not, false and err (when not
 * NULL) the one message, the sizes named as the caller's reader knows them:
 *   "--kv-heads 3 does not divide --heads 4: each key-value head serves the
 *    same number of query heads"
 * require_kv_heads: for a caller whose sizes were checked before; dies
 * when they do not fit (a bug). */
bool kv_heads_split(int num_heads, int num_kv_heads, const char *heads_name,
                    const char *kv_heads_name, char *err, size_t err_len);
void require_kv_heads(int num_heads, int num_kv_heads);

/* Grouped-query attention (05_multihead/decoding.md): G key-value heads
 * serve H query heads, H / G each, so query head h reads key-value head
 * h / (H / G). Repeating each of the G heads H / G times in a row turns
 * them into H heads that multi-head attention reads as its own, in the
 * order of torch.repeat_interleave(kv, H // G, dim=1):
 *   x (B*G, T, d) -> out (B*H, T, d), out[b*H + h] = x[b*G + h / (H/G)]
 * The backward adds the H / G gradients of each copy back into its head. */
Tensor *repeat_kv_heads(const Tensor *x, int num_kv_heads, int num_heads);
Tensor *repeat_kv_heads_backward(const Tensor *grad, int num_kv_heads, int num_heads);
/* A key or value projection into the H heads that read it:
 *   x (B, n_k, G*d) -> transpose_qkv into G heads -> repeat_kv_heads -> (B*H, n_k, d)
 * (with G = H, transpose_qkv alone), and its backward (B*H, n_k, d) -> (B, n_k, G*d). */
Tensor *split_kv_heads(const Tensor *x, int num_kv_heads, int num_heads);
Tensor *split_kv_heads_backward(const Tensor *grad, int num_kv_heads, int num_heads);

/* valid_lens (B,) -> (B*H,) and (B, T) -> (B*H, T): each sequence's
 * lengths repeated H times in a row, like torch.repeat_interleave. */
ValidLens *valid_lens_repeat_interleave(const ValidLens *valid_lens, int num_heads);

#endif
