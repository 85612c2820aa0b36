// libmicrohttpd for Swift: MHD_start_daemon and the info getters are C-variadic, which Swift
// cannot call, so fixed-argument wrappers live here (as for libcurl in CCurl/shim.h).
#include <stdint.h>
#include <sys/types.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <stdio.h>
#include <microhttpd.h>

#include <stdarg.h>

/// Where libmicrohttpd's error messages go: `fn(ctx, line)`, the line formatted here (a C
/// va_list cannot reach Swift).
typedef void (*vc_mhd_line_fn)(void *ctx, const char *line);
struct vc_mhd_logger { vc_mhd_line_fn fn; void *ctx; };

static void vc_mhd_log(void *cls, const char *format, va_list ap) {
    struct vc_mhd_logger *logger = (struct vc_mhd_logger *)cls;
    char line[512];
    vsnprintf(line, sizeof line, format, ap);
    if (logger && logger->fn) logger->fn(logger->ctx, line);
}

/// A request URL percent-decoded as libmicrohttpd does it (`MHD_http_unescape`), except that a
/// decoded NUL (`%00`) becomes U+0001: the handler reads the URL as a C string, which would end at
/// the NUL, so `/v/T/a.m4s%00.mpd` would be read as `/v/T/a.m4s` and answered with another
/// resource's bytes than the one asked. U+0001 is a control character: the proxy refuses it.
static size_t vc_mhd_unescape(void *cls, struct MHD_Connection *connection, char *s) {
    (void)cls; (void)connection;
    size_t n = MHD_http_unescape(s);
    for (size_t i = 0; i < n; i++) if (s[i] == '\0') s[i] = '\x01';
    return n;
}

/// Thread per connection, poll() (select() breaks past fd 1024), bound to `addr`, with every limit
/// set explicitly; its error messages to `logger` (none when NULL) (a memory limit of 0 is taken literally: every request would fail with 414).
static inline struct MHD_Daemon *vc_mhd_start(const struct sockaddr *addr,
                                              MHD_AccessHandlerCallback handler, void *handler_cls,
                                              MHD_RequestCompletedCallback completed, void *completed_cls,
                                              MHD_NotifyConnectionCallback notify, void *notify_cls,
                                              void *(*uri_log)(void *cls, const char *uri, struct MHD_Connection *con), void *uri_log_cls,
                                              unsigned int timeout_seconds, unsigned int connection_limit,
                                              unsigned int per_ip_limit, size_t memory_limit, size_t stack_size,
                                              unsigned int ipv6, struct vc_mhd_logger *logger) {
    unsigned int flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_AUTO;
    if (ipv6) flags |= MHD_USE_IPv6;
    if (logger) flags |= MHD_USE_ERROR_LOG;
    return MHD_start_daemon(flags, 0, NULL, NULL, handler, handler_cls,
                            MHD_OPTION_SOCK_ADDR, addr,
                            MHD_OPTION_CONNECTION_TIMEOUT, timeout_seconds,
                            MHD_OPTION_CONNECTION_LIMIT, connection_limit,
                            MHD_OPTION_PER_IP_CONNECTION_LIMIT, per_ip_limit,
                            MHD_OPTION_CONNECTION_MEMORY_LIMIT, memory_limit,
                            MHD_OPTION_THREAD_STACK_SIZE, stack_size,
                            MHD_OPTION_NOTIFY_COMPLETED, completed, completed_cls,
                            MHD_OPTION_NOTIFY_CONNECTION, notify, notify_cls,
                            MHD_OPTION_URI_LOG_CALLBACK, uri_log, uri_log_cls,
                            MHD_OPTION_EXTERNAL_LOGGER, vc_mhd_log, (void *)logger,
                            MHD_OPTION_UNESCAPE_CALLBACK, vc_mhd_unescape, NULL,
                            MHD_OPTION_END);
}

/// The port the daemon listens on (useful after binding port 0).
static inline unsigned int vc_mhd_port(struct MHD_Daemon *daemon) {
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(daemon, MHD_DAEMON_INFO_BIND_PORT);
    return info ? info->port : 0;
}

/// The connection's socket (to notice a client that left while a body callback waits).
static inline int vc_mhd_connection_fd(struct MHD_Connection *connection) {
    const union MHD_ConnectionInfo *info = MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CONNECTION_FD);
    return info ? info->connect_fd : -1;
}

/// Bytes of this TCP connection the peer has acknowledged (tcpi_bytes_acked, Linux 4.6+), or -1:
/// how much of a response body sent by sendfile a client that left really got.
#ifdef __linux__
#include <string.h>
static inline long long vc_tcp_bytes_acked(int fd) {
    /* struct tcp_info as the kernel lays it out (linux/tcp.h): tcpi_bytes_acked is the u64 at
       offset 120 (Linux 4.6+). linux/tcp.h itself clashes with glibc's netinet/tcp.h in a Swift
       build (two definitions of struct tcp_info), so the bytes are read at their offset. */
    unsigned char info[256] __attribute__((aligned(8)));
    socklen_t size = sizeof info;
    if (fd < 0 || getsockopt(fd, IPPROTO_TCP, 11 /* TCP_INFO */, info, &size) != 0 || size < 128) return -1;
    unsigned long long acked;
    memcpy(&acked, info + 120, sizeof acked);
    return (long long)acked;
}
/// Whether the peer of this TCP connection was still there when this side closed it: 1 when it
/// had not closed (ESTABLISHED, or FIN_WAIT1/2 once this side shut its writing down, or TIME_WAIT:
/// this side's FIN went first and the peer answered it), 0 when the peer closed or reset it first
/// (CLOSE_WAIT, LAST_ACK, CLOSING, CLOSE), -1 when unknown. tcpi_state is struct tcp_info's first byte.
static inline int vc_tcp_peer_open(int fd) {
    unsigned char info[256] __attribute__((aligned(8)));
    socklen_t size = sizeof info;
    if (fd < 0 || getsockopt(fd, IPPROTO_TCP, 11 /* TCP_INFO */, info, &size) != 0 || size < 1) return -1;
    switch (info[0]) {
    case 1: case 4: case 5: case 6: return 1;   /* ESTABLISHED, FIN_WAIT1, FIN_WAIT2, TIME_WAIT */
    case 7: case 8: case 9: case 11: return 0;  /* CLOSE, CLOSE_WAIT, LAST_ACK, CLOSING */
    default: return -1;
    }
}
#else
static inline long long vc_tcp_bytes_acked(int fd) { (void)fd; return -1; }
static inline int vc_tcp_peer_open(int fd) { (void)fd; return -1; }
#endif

/// The client's address as text ("127.0.0.1"), into buf; empty when unknown.
static inline void vc_mhd_client(struct MHD_Connection *connection, char *buf, socklen_t size) {
    buf[0] = 0;
    const union MHD_ConnectionInfo *info = MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    if (!info || !info->client_addr) return;
    const struct sockaddr *sa = info->client_addr;
    if (sa->sa_family == AF_INET) {
        const unsigned char *b = (const unsigned char *)&((const struct sockaddr_in *)sa)->sin_addr;
        snprintf(buf, size, "%u.%u.%u.%u", b[0], b[1], b[2], b[3]);
    } else if (sa->sa_family == AF_INET6) {
        snprintf(buf, size, "[ipv6]");
    }
}
