/*
 * A small SVG line chart for the benchmark: series of y against M on a log2
 * x axis, a log10 or linear y axis, a legend. Plain text out, no library.
 */
#ifndef MT_TUNER_CHART_H
#define MT_TUNER_CHART_H

#include <stdio.h>
#include "moetune/status.h"

#define MT_CHART_MAX_SERIES 8

typedef struct mt_chart_series {
    const char *name;
    const double *y;         /* n values; <= 0 or NaN: no point */
} mt_chart_series;

typedef struct mt_chart {
    const char *title;
    const char *y_label;
    int log_y;
    const double *x;         /* n values of M, > 0, increasing */
    int n;
    mt_chart_series series[MT_CHART_MAX_SERIES];
    int nseries;
} mt_chart;

/* Write one chart as an <svg> element of width x height at (0, y0) inside
 * a document (see mt_chart_write_doc). */
mt_status mt_chart_write(FILE *f, const mt_chart *c, int width, int height, int y0);

/* A whole SVG document holding the charts one below the other. */
mt_status mt_chart_write_doc(FILE *f, const mt_chart *charts, int ncharts);

#endif
