/*
 * SVG line charts (see chart.h).
 */
#include "tuner/chart.h"

#include <math.h>

static const char *const colors[MT_CHART_MAX_SERIES] = {
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"};

static int usable(double v) { return isfinite(v) && v > 0; }

/* Escape the few characters SVG text cannot hold as is. */
static void text(FILE *f, const char *s)
{
    for (; s && *s; s++) {
        if (*s == '<')
            fputs("&lt;", f);
        else if (*s == '>')
            fputs("&gt;", f);
        else if (*s == '&')
            fputs("&amp;", f);
        else
            fputc(*s, f);
    }
}

mt_status mt_chart_write(FILE *f, const mt_chart *c, int width, int height, int y0)
{
    if (!f || !c || c->n < 1 || c->nseries < 1 || c->nseries > MT_CHART_MAX_SERIES)
        return MT_ERR_INVALID_ARG;
    double ymin = INFINITY, ymax = -INFINITY;
    for (int s = 0; s < c->nseries; s++)
        for (int i = 0; i < c->n; i++)
            if (usable(c->series[s].y[i])) {
                ymin = fmin(ymin, c->series[s].y[i]);
                ymax = fmax(ymax, c->series[s].y[i]);
            }
    for (int i = 0; i < c->n; i++)
        if (!usable(c->x[i]) || (i && c->x[i] <= c->x[i - 1]))
            return MT_ERR_INVALID_ARG;
    if (!isfinite(ymin))
        ymin = 1, ymax = 10;
    if (c->log_y) {
        ymin = pow(10, floor(log10(ymin)));
        ymax = pow(10, ceil(log10(ymax)));
        if (ymax <= ymin)   /* every value one power of ten: a decade, not a span of 0 */
            ymax = ymin * 10;
    } else {
        ymin = 0;
        ymax = ymax > 0 ? ymax * 1.1 : 1;
    }
    const double L = 70, R = 190, T = 30, B = 45;
    const double pw = width - L - R, ph = height - T - B;
    const double x0 = log2(c->x[0]), x1 = c->n > 1 ? log2(c->x[c->n - 1]) : x0 + 1;
#define PX(v) (L + (log2(v) - x0) / (x1 - x0) * pw)
#define PY(v) (T + ph - (c->log_y ? (log10(v) - log10(ymin)) / (log10(ymax) - log10(ymin))  \
                                  : ((v)-ymin) / (ymax - ymin)) * ph)
    fprintf(f, "<g transform=\"translate(0,%d)\">\n", y0);
    fprintf(f, "<text x=\"%g\" y=\"18\" font-size=\"14\" font-family=\"sans-serif\">", L);
    text(f, c->title);
    fprintf(f, "</text>\n<rect x=\"%g\" y=\"%g\" width=\"%g\" height=\"%g\" fill=\"none\" "
               "stroke=\"#888\"/>\n", L, T, pw, ph);
    for (int i = 0; i < c->n; i++)   /* x ticks: the measured M */
        fprintf(f, "<text x=\"%.1f\" y=\"%g\" font-size=\"10\" text-anchor=\"middle\" "
                   "font-family=\"sans-serif\">%.0f</text>\n", PX(c->x[i]), T + ph + 14, c->x[i]);
    fprintf(f, "<text x=\"%g\" y=\"%g\" font-size=\"11\" text-anchor=\"middle\" "
               "font-family=\"sans-serif\">M (tokens)</text>\n", L + pw / 2, T + ph + 32);
    for (int k = 0; k <= 4; k++) {   /* y ticks */
        double v = c->log_y ? pow(10, log10(ymin) + (log10(ymax) - log10(ymin)) * k / 4)
                            : ymin + (ymax - ymin) * k / 4;
        fprintf(f, "<text x=\"%g\" y=\"%.1f\" font-size=\"10\" text-anchor=\"end\" "
                   "font-family=\"sans-serif\">%.3g</text>\n", L - 4, PY(v) + 3, v);
    }
    fprintf(f, "<text x=\"14\" y=\"%g\" font-size=\"11\" font-family=\"sans-serif\" "
               "transform=\"rotate(-90 14 %g)\" text-anchor=\"middle\">", T + ph / 2, T + ph / 2);
    text(f, c->y_label);
    fputs("</text>\n", f);
    for (int s = 0; s < c->nseries; s++) {
        fprintf(f, "<polyline fill=\"none\" stroke-width=\"2\" stroke=\"%s\" points=\"", colors[s]);
        for (int i = 0; i < c->n; i++)
            if (usable(c->series[s].y[i]))
                fprintf(f, "%.1f,%.1f ", PX(c->x[i]), PY(c->series[s].y[i]));
        fputs("\"/>\n", f);
        fprintf(f, "<text x=\"%g\" y=\"%g\" font-size=\"11\" fill=\"%s\" "
                   "font-family=\"sans-serif\">", L + pw + 10, T + 14 + 16 * s, colors[s]);
        text(f, c->series[s].name);
        fputs("</text>\n", f);
    }
    fputs("</g>\n", f);
#undef PX
#undef PY
    return ferror(f) ? MT_ERR_IO : MT_OK;
}

mt_status mt_chart_write_doc(FILE *f, const mt_chart *charts, int ncharts)
{
    const int w = 860, h = 340;
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
               "viewBox=\"0 0 %d %d\">\n<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n",
            w, h * ncharts, w, h * ncharts);
    for (int i = 0; i < ncharts; i++) {
        mt_status st = mt_chart_write(f, &charts[i], w, h, h * i);
        if (st)
            return st;
    }
    fputs("</svg>\n", f);
    return ferror(f) ? MT_ERR_IO : MT_OK;
}
