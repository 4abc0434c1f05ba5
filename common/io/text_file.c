/*
 * text_file.c - a text read whole, checked to be text (introduced in
 * chapter 06's page "A language model"). See text_file.h.
 */
#define _POSIX_C_SOURCE 200809L
#include "io/text_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "error.h"

size_t utf8_first_invalid(const unsigned char *text, size_t n)
{
    size_t i = 0;
    while (i < n) {
        const unsigned char c = text[i];
        // how many continuation bytes (10xxxxxx) the leading byte announces,
        // and the smallest code point that needs that many (no overlong forms)
        int follow;
        unsigned long code, min;
        if (c == 0)
            return i;
        if (c < 0x80) {
            i++;
            continue;
        } else if ((c & 0xE0) == 0xC0) {
            follow = 1, code = c & 0x1F, min = 0x80;
        } else if ((c & 0xF0) == 0xE0) {
            follow = 2, code = c & 0x0F, min = 0x800;
        } else if ((c & 0xF8) == 0xF0) {
            follow = 3, code = c & 0x07, min = 0x10000;
        } else {
            return i;
        }
        if (n - i <= (size_t)follow)
            return i;
        for (int k = 1; k <= follow; k++) {
            if ((text[i + k] & 0xC0) != 0x80)
                return i;
            code = (code << 6) | (text[i + k] & 0x3F);
        }
        if (code < min || code > 0x10FFFF || (code >= 0xD800 && code <= 0xDFFF))
            return i;
        i += (size_t)follow + 1;
    }
    return n;
}

int text_file_read(const char *path, unsigned char **bytes, size_t *length, char *err,
                   size_t err_len)
{
    /* without blocking: a named pipe that nobody writes would hold open()
     * forever; it opens at once and is refused below as not a file */
    const int fd = open(path, O_RDONLY | O_NONBLOCK);
    if (fd < 0)
        return error_format(err, err_len, path, "cannot be read: %s", strerror(errno));
    struct stat info;
    if (fstat(fd, &info) != 0 || !S_ISREG(info.st_mode)) {
        close(fd);
        return error_format(err, err_len, path, "is not a regular file");
    }
    FILE *file = fdopen(fd, "rb");
    if (file == NULL) {
        const int error = errno;
        close(fd);
        return error_format(err, err_len, path, "cannot be read: %s", strerror(error));
    }
    const size_t n = (size_t)info.st_size;
    if (n == 0 || n > TEXT_FILE_MAX_BYTES) {
        fclose(file);
        return error_format(err, err_len, path, n == 0 ? "is empty" : "is larger than %zu bytes",
                            TEXT_FILE_MAX_BYTES);
    }
    unsigned char *text = malloc(n);
    if (text == NULL) {
        fclose(file);
        return error_format(err, err_len, path, "out of memory for its %zu bytes", n);
    }
    const size_t got = fread(text, 1, n, file);
    fclose(file);
    if (got != n) {
        free(text);
        return error_format(err, err_len, path, "could not be read whole (%zu of %zu bytes)",
                            got, n);
    }
    const size_t bad = utf8_first_invalid(text, n);
    if (bad < n) {
        const unsigned byte = text[bad];
        free(text);
        return error_format(err, err_len, path, "is not text: byte %zu is 0x%02x, %s", bad, byte,
                            byte == 0 ? "a NUL" : "not UTF-8");
    }
    *bytes = text;
    *length = n;
    return 0;
}
