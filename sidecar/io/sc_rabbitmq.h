/* rabbitmq-c's headers, wherever this version keeps them: <rabbitmq-c/...>
 * since 0.12, where the old names <amqp.h>, <amqp_tcp_socket.h> and
 * <amqp_ssl_socket.h> are shims that #warning (an error under -Werror: Debian
 * 13 ships 0.15); only the old names before 0.12 (Debian 12 ships 0.11).
 * Include this, never those, for any rabbitmq-c declaration. */
#ifndef SC_RABBITMQ_H
#define SC_RABBITMQ_H

#if defined(__has_include)
#if __has_include(<rabbitmq-c/amqp.h>)
#define SC_RABBITMQ_C_DIR 1
#endif
#endif

#ifdef SC_RABBITMQ_C_DIR
#include <rabbitmq-c/amqp.h>
#include <rabbitmq-c/ssl_socket.h>
#include <rabbitmq-c/tcp_socket.h>
#else
#include <amqp.h>
#include <amqp_ssl_socket.h>
#include <amqp_tcp_socket.h>
#endif

#endif
