/*
 * libmoetune: the one header an inference engine includes.
 */
#ifndef MOETUNE_MOETUNE_H
#define MOETUNE_MOETUNE_H

#include "moetune/status.h"
#include "moetune/problem.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The library version, "MAJOR.MINOR.PATCH". */
const char *mt_version(void);

#ifdef __cplusplus
}
#endif
#endif
