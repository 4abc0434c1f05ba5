/*
 * model.h - a model saved as a directory of .npy files (introduced in
 * chapter 05's optional section "Attention that learns").
 *
 * Each file is named as PyTorch names the parameter in its state_dict,
 * with .npy added, so a few lines of Python rebuild the module:
 *
 *     DIR/embed_keys.weight.npy          (V, D)
 *     DIR/attention.in_proj_weight.npy   (3 D, D) = W_q, W_k, W_v stacked
 *     DIR/attention.out_proj.weight.npy  (D, D)
 *     ...
 *     state = {name: torch.from_numpy(np.load(f"DIR/{name}.npy")) for name in names}
 *     module.load_state_dict(state)
 *
 * The list of files is the model's own description of itself
 * (state_dict.h): one ModelFile per PyTorch parameter name, several
 * C tensors stacked in one file where PyTorch stacks them.
 *
 * The directory is written as one set by the writer (fileset.h): a kill
 * at any moment leaves the old model or the new one, never a mix, and a
 * number that is not finite (Adam's moments overflowed) is never written:
 * the save fails naming it and the previous model stays. Loading reads and
 * checks every file before it changes any tensor, so a failed load leaves
 * the model as it was.
 *
 * Errors come back as one line in err (which must be given, error.h),
 * naming the file and what was expected, as npy.h does.
 */
#ifndef MODEL_IO_H
#define MODEL_IO_H

#include <stddef.h>

#include "state_dict.h"
#include "tensor.h"

enum { MODEL_ERR_LEN = 768 };

/* Write DIR/NAME.npy for each of files[0..count) as a set (see above).
 * dir must exist. Returns 0, or -1 with err filled and nothing new left
 * under dir. */
int model_save(const char *dir, const ModelFile *files, int count, char *err, size_t err_len);

/* Read every file back into the parts (or ints) it names. Each file must
 * hold exactly the shape of its stacked parts (or num_ints numbers).
 * Returns 0, or -1 with err filled and no tensor changed. */
int model_load(const char *dir, const ModelFile *files, int count, char *err, size_t err_len);

/* Read the whole numbers of DIR/NAME.npy (a 1-D '<i4' or '<i8' file of
 * exactly count values) into out: what a program needs to know before it
 * can build the model that model_load fills. Returns 0 or -1. */
int model_read_ints(const char *dir, const char *name, int *out, int count,
                    char *err, size_t err_len);

#endif
