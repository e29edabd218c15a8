/*
 * libmoetune version.
 */
#include "moetune/moetune.h"

const char *mt_version(void) { return MT_VERSION_STRING; }
