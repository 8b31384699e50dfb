/* Logging. Only cmd/ and the top of each component log (STYLE.md); library code returns
 * -errno instead. Lines go to stderr as "LEVEL component: message". */
#pragma once
#include "base/base.h"

enum kite_log_level { KITE_LOG_DEBUG, KITE_LOG_INFO, KITE_LOG_WARN, KITE_LOG_ERROR };

void kite_log_set_level(enum kite_log_level level);
void kite_log(enum kite_log_level level, const char *component, const char *fmt, ...) KITE_PRINTF(3, 4);

#define log_debug(comp, ...) kite_log(KITE_LOG_DEBUG, comp, __VA_ARGS__)
#define log_info(comp, ...) kite_log(KITE_LOG_INFO, comp, __VA_ARGS__)
#define log_warn(comp, ...) kite_log(KITE_LOG_WARN, comp, __VA_ARGS__)
#define log_error(comp, ...) kite_log(KITE_LOG_ERROR, comp, __VA_ARGS__)
