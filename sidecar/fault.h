/* Named fault points for crash tests, compiled in only with
 * -Dfault_points=true. SIDECAR_FAULT=NAME[:N] makes the process _exit(86)
 * at the Nth time (default the first) it reaches point NAME; with
 * SIDECAR_FAULT_PAUSE_MS=MS it sleeps that long there instead. */
#ifndef SC_FAULT_H
#define SC_FAULT_H

#include "sc_build_config.h"

#define SC_FAULT_EXIT_CODE 86

#if SC_FAULT_POINTS
void sc_fault_point(const char *name);
#define SC_FAULT(name) sc_fault_point(name)
#else
#define SC_FAULT(name) ((void)0)
#endif

#endif
