/*
 * text_escape.h - strings from others made safe to print: nexard's log lines and
 * nexarctl's tables carry job names, addresses and error texts that a client chose.
 */
#ifndef NX_TEXT_ESCAPE_H
#define NX_TEXT_ESCAPE_H

#include <stddef.h>

/* Copies in to out (len bytes with the NUL) with every control byte, DEL and byte that is
 * not part of well-formed UTF-8 written as \xNN, so that a string can neither start a
 * forged line nor move a terminal's cursor nor put raw bytes in a file.  Returns the
 * length written (a sequence that does not fit is left out whole). */
size_t nx_text_escape(const char *in, char *out, size_t len);

#endif
