/* Start-up notification to a service manager (systemd, Type=notify). */
#ifndef SC_NOTIFY_H
#define SC_NOTIFY_H

/* Sends "READY=1" and "STATUS=<status>" to the socket named by
 * NOTIFY_SOCKET: start-up checks are done (config, handlers, listeners).
 * Does nothing when NOTIFY_SOCKET is unset. Returns 0, or a negative errno
 * when the message could not be sent (logged once, as a warning: the
 * service manager then times the start out, the daemon itself is fine). */
int sc_notify_ready(const char *status);

/* Sends one notification (newline-separated VAR=value lines) as it is.
 * Same return values as sc_notify_ready. */
int sc_notify(const char *state);

#endif
