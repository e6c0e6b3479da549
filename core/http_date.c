#include "core/http_date.h"

#include <stdio.h>

size_t sws_http_date_format(time_t t, char *out)
{
    static const char days[7][4] = { "Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat" };
    static const char months[12][4] = { "Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                        "Jul", "Aug", "Sep", "Oct", "Nov", "Dec" };
    struct tm tm;
    gmtime_r(&t, &tm);
    /* Years past 9999 do not fit the format; clamp rather than overflow. */
    int year = tm.tm_year + 1900;
    if (year > 9999)
        year = 9999;
    snprintf(out, SWS_HTTP_DATE_BUF, "%s, %02d %s %04d %02d:%02d:%02d GMT",
             days[tm.tm_wday], tm.tm_mday, months[tm.tm_mon], year, tm.tm_hour, tm.tm_min,
             tm.tm_sec);
    return SWS_HTTP_DATE_LEN;
}
