/*
 * text_file.h - a text a model trains on, read whole (introduced in
 * chapter 06's page "A language model").
 *
 * The language model's tokens are bytes: a text is read as its bytes,
 * and one in UTF-8 with letters beyond ASCII gives such a letter as two to
 * four tokens. A file is refused, with one line naming it, when it cannot
 * be read, is not a regular file (a folder, a named pipe: refused before
 * any read, so a pipe nobody writes never holds the program), is empty,
 * is larger than TEXT_FILE_MAX_BYTES, or is not text:
 * it holds a NUL byte, or bytes that are not UTF-8 (an image, a
 * compressed file, a text in another encoding).
 */
#ifndef TEXT_FILE_H
#define TEXT_FILE_H

#include <stddef.h>

#define TEXT_FILE_MAX_BYTES ((size_t)1 << 30)

/* path -> *bytes (new, the caller frees), *length > 0. Returns 0, or -1
 * with one line in err and nothing allocated. */
int text_file_read(const char *path, unsigned char **bytes, size_t *length, char *err,
                   size_t err_len);

/* The offset of the first byte of text[0 .. n) that breaks UTF-8 (or a
 * NUL byte), n when there is none. */
size_t utf8_first_invalid(const unsigned char *text, size_t n);

#endif
