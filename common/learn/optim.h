/*
 * optim.h - parameters and their optimisers: Adam and plain SGD
 * (introduced in chapter 05's optional section "Attention that learns").
 *
 * A model lists its trainable tensors as Parameters: a name (PyTorch's, as
 * model.named_parameters() gives it), the value and its gradient, which
 * every backward adds into (+=, as PyTorch's .grad accumulates). A training
 * step is then
 *     parameters_zero_grad(params, n);     // optimizer.zero_grad()
 *     ... forward, loss, backward ...      // loss.backward()
 *     adam_step(adam);                     // optimizer.step()
 *
 * Adam (Kingma and Ba, 2015) with torch.optim.Adam's defaults and its
 * exact arithmetic, step t = 1, 2, ...:
 *     m = beta1 m + (1 - beta1) g             first moment
 *     v = beta2 v + (1 - beta2) g^2           second moment
 *     p -= lr * (m / (1 - beta1^t)) / (sqrt(v / (1 - beta2^t)) + eps)
 * The two divisions by (1 - beta^t) are the bias correction: m and v start
 * at 0, so without them the first steps would be too small.
 * Defaults: beta1 = 0.9, beta2 = 0.999, eps = 1e-8, no weight decay.
 *
 * AdamW (Loshchilov and Hutter, 2019), torch.optim.AdamW: with
 * weight_decay > 0, each step first shrinks the parameter,
 *     p *= 1 - lr * weight_decay
 * and then takes Adam's step; the decay is kept out of m and v, so it
 * pulls every weight toward 0 at the same rate, however large its
 * gradients. As nanoGPT does, only matrices decay (a value of 2 or more
 * dimensions: the weights and embeddings), never biases or a layer
 * norm's scale.
 *
 * SGD: p -= lr * g.
 */
#ifndef OPTIM_H
#define OPTIM_H

#include "learn/adam_update.h"
#include "tensor.h"

typedef struct {
    const char *name;   /* "embed_keys.weight", as PyTorch names it */
    Tensor *value;
    Tensor *grad;       /* same shape as value */
} Parameter;

/* grad = 0 for every parameter. */
void parameters_zero_grad(const Parameter *params, int count);
/* Total number of trainable numbers. */
size_t parameters_count(const Parameter *params, int count);
/* true when every value is finite. */
bool parameters_finite(const Parameter *params, int count);
/* The sum of x[j]^2 over x (n,), in double: eight running sums, x[j]^2
 * added to sum j % 8, then ((s0 + s1) + (s2 + s3)) + ((s4 + s5) + (s6 + s7)).
 * One running sum makes each addition wait for the one before (four
 * cycles each); eight do not wait, and their order is fixed, so the bits
 * are the same on every machine and thread count. */
double squares_sum(const float *x, size_t n);
/* Gradient clipping by global norm, torch.nn.utils.clip_grad_norm_: the
 * norm of all gradients as one vector (each gradient's squares_sum, added
 * in parameter order); when it exceeds max_norm, every gradient is
 * multiplied by max_norm / (norm + 1e-6). Returns the norm before
 * clipping. */
double parameters_clip_grad_norm(const Parameter *params, int count, double max_norm);

typedef struct {
    float lr, beta1, beta2, eps;
    float weight_decay;      /* AdamW's, on matrices only; 0: Adam */
    long step;               /* steps taken so far, t */
    int count;
    const Parameter *params; /* borrowed: the model owns them */
    Tensor **m, **v;         /* first and second moments, one per parameter */
} Adam;

/* Adam over params[0..count) with learning rate lr and PyTorch's defaults
 * for the rest (change beta1, beta2 or eps in the struct before the first
 * step if needed). params must stay alive while the optimiser is used. */
Adam *adam_new(const Parameter *params, int count, float lr);
/* One step of every parameter: step t += 1, then adamw_update (adamw.h) on
 * each with the optimiser's weight decay for a matrix and none for a
 * vector. */
void adam_step(Adam *adam);
/* adam_step's update, step t not counted, of part `part` of every
 * parameter: its elements n * part / parts .. n * (part + 1) / parts - 1.
 * Each element's update reads that element alone, so the parts, run on
 * threads of their own, give adam_step's bits:
 *     adam->step++;  then part t = 0 .. parts-1 on thread t */
void adam_update_part(const Adam *adam, int part, int parts);

/* One tensor's step, the pieces adam_step is made of: adam_update
 * (adam_update.h, included above), Adam's rule with no decay, and */
/* adamw.h: the same with AdamW's decay first, and the learning-rate schedule. */
void adam_free(Adam *adam);   /* NULL is fine */

/* A copy of the parameters and of Adam's state (m, v, step), to go back
 * to: training keeps the last state whose loss was a number, so that a
 * loss that overflows does not cost the model. */
typedef struct {
    int count;
    long step;
    Tensor **values, **m, **v;   /* copies, one per parameter */
} AdamSnapshot;

AdamSnapshot *adam_snapshot_new(const Adam *adam);   /* holds adam's state now */
void adam_snapshot_take(AdamSnapshot *snapshot, const Adam *adam);
/* The parameters and the moments copied back in, and the step count. */
void adam_snapshot_restore(const AdamSnapshot *snapshot, Adam *adam);
void adam_snapshot_free(AdamSnapshot *snapshot);    /* NULL is fine */

/* One step of plain gradient descent: p -= lr * g. */
void sgd_step(const Parameter *params, int count, float lr);

#endif
