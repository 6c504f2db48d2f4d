/* URL checks and what logs may show of a URL: the reason a URL is refused
 * and the endpoint printed for it never hold any part of its password. */
#include <string.h>

#include "io/url.h"
#include "tests/unit/tap.h"

#define SECRET "QzXw7Tk"

static void refused(const char *url, const char *want, const char *label)
{
    char why[256] = "";
    int rc = sc_url_check(url, why, sizeof why);
    ok(rc != 0 && strstr(why, want) && !strstr(why, SECRET) && !strstr(why, "vB3n"),
       "%s: refused (%s)", label, why);
}

static void accepted(const char *url, const char *label)
{
    char why[256] = "";
    ok(sc_url_check(url, why, sizeof why) == 0, "%s: accepted (%s)", label, why);
}

static void shown_without_secret(const char *url, const char *label)
{
    char ep[300], red[300];
    sc_url_endpoint(url, ep, sizeof ep);
    sc_url_redact(url, red, sizeof red);
    ok(!strstr(ep, SECRET) && !strstr(ep, "vB3n") && !strstr(red, SECRET) && !strstr(red, "vB3n"),
       "%s: endpoint '%s', redacted '%s'", label, ep, red);
}

int main(void)
{
    accepted("mysql://u:" SECRET "%2FvB3n%3FLp9%23Mh@127.0.0.1:3306/app", "mysql, encoded '/', '?', '#'");
    accepted("mysql://u:p@ss@127.0.0.1/app", "mysql, '@' in the password (the last '@' ends it)");
    accepted("mysql://u:p:ss@127.0.0.1/app", "mysql, ':' in the password");
    accepted("mysql://u@/app?socket=/run/mysqld/mysqld.sock", "mysql socket URL");
    accepted("amqp://g:" SECRET "%2FvB3n%40x%3Ay@127.0.0.1:5672/%2f", "amqp, encoded '/', '@', ':'");
    accepted("amqps://g:g@localhost/%2f", "amqps, default port");
    accepted("amqp://127.0.0.1", "amqp, no credentials");

    refused("mysql://u:" SECRET "/vB3n@127.0.0.1:3306/app", "percent-encoded", "mysql, '/' in the password");
    refused("mysql://u:" SECRET "?vB3n@127.0.0.1:3306/app", "percent-encoded", "mysql, '?' in the password");
    refused("amqp://g:" SECRET "/vB3n@127.0.0.1:5672/%2f", "percent-encoded", "amqp, '/' in the password");
    refused("amqp://g:" SECRET "#vB3n@127.0.0.1:5672/%2f", "percent-encoded", "amqp, '#' in the password");
    refused("amqp://g:" SECRET "@vB3n@127.0.0.1:5672/%2f", "%40", "amqp, '@' in the password");
    refused("amqp://g:" SECRET ":vB3n@127.0.0.1:5672/%2f", "%3A", "amqp, ':' in the password");
    refused("mysql://u:" SECRET "@127.0.0.1:99999/app", "bad port", "mysql, port 99999");
    refused("mysql://u:" SECRET "@127.0.0.1:33a/app", "bad port", "mysql, port not a number");
    refused("amqp://g:" SECRET "@127.0.0.1:0/%2f", "bad port", "amqp, port 0");
    refused("mysql://u:" SECRET "%zz@127.0.0.1/app", "percent-escape", "mysql, bad escape");
    refused("mysql://u:" SECRET "@127.0.0.1/app?sslmode=" SECRET, "unknown parameter",
            "mysql, unknown parameter (named, the URL's credentials never)");
    refused("ftp://u:" SECRET "@h/", "expected", "another scheme");

    shown_without_secret("mysql://sidecar:" SECRET "/vB3n@127.0.0.1:3306/app", "mysql, cut by '/'");
    shown_without_secret("mysql://sidecar:" SECRET "?vB3n@127.0.0.1:3306/app", "mysql, cut by '?'");
    shown_without_secret("amqp://guest:" SECRET "/vB3n@127.0.0.1:5672/%2f", "amqp, cut by '/'");
    shown_without_secret("amqp://guest:" SECRET "#vB3n@127.0.0.1:5672/%2f", "amqp, cut by '#'");
    shown_without_secret("mysql://sidecar:" SECRET "@127.0.0.1:3306/app", "a good URL");
    char ep[300];
    sc_url_endpoint("mysql://sidecar:" SECRET "@127.0.0.1:3306/app", ep, sizeof ep);
    is_str(ep, "127.0.0.1:3306", "a good URL's endpoint is host:port");
    return done();
}
