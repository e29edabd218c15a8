/*
 * How act_quant's block-scale kernels (gran block) deal their work, shared
 * by the device code (act_quant.cuh) and the launcher that sizes their grid
 * (runtime/moe_launch.c); kept apart from moe_args.h so that the other
 * families' sources, and the hashes of their templates, stay as they are.
 *
 * A team of 16 lanes quantizes MT_QUANT_BLOCK_GROUPS 128-column row groups
 * per pass, their loads issued together. Any grid is correct (the kernel
 * strides over the groups); the launcher gives each team that many.
 */
#ifndef MT_ACT_QUANT_GRID_H
#define MT_ACT_QUANT_GRID_H

#define MT_QUANT_BLOCK_GROUPS 4

#endif
