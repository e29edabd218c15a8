/* Problem names and validation: being built (issue 2). */
#include "moetune/problem.h"
