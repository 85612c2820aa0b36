// Swift cannot call C variadic functions, so each curl_*_setopt/getinfo use gets a typed,
// non-variadic wrapper here. Debian keeps curl.h under the multiarch include folder, hence
// the plain <curl/curl.h> rather than an absolute path.
#ifndef VCACHE_CCURL_SHIM_H
#define VCACHE_CCURL_SHIM_H
#include <curl/curl.h>
#include <errno.h>
#include <sys/socket.h>

static inline CURLcode vc_easy_setopt_long(CURL *h, CURLoption o, long v) { return curl_easy_setopt(h, o, v); }
static inline CURLcode vc_easy_setopt_off(CURL *h, CURLoption o, curl_off_t v) { return curl_easy_setopt(h, o, v); }
static inline CURLcode vc_easy_setopt_ptr(CURL *h, CURLoption o, void *v) { return curl_easy_setopt(h, o, v); }
static inline CURLcode vc_easy_setopt_str(CURL *h, CURLoption o, const char *v) { return curl_easy_setopt(h, o, v); }
static inline CURLcode vc_easy_setopt_slist(CURL *h, CURLoption o, struct curl_slist *v) { return curl_easy_setopt(h, o, v); }

typedef size_t (*vc_data_callback)(char *ptr, size_t size, size_t nmemb, void *userdata);
static inline CURLcode vc_easy_setopt_datacb(CURL *h, CURLoption o, vc_data_callback cb) { return curl_easy_setopt(h, o, cb); }

static inline CURLcode vc_easy_getinfo_long(CURL *h, CURLINFO i, long *v) { return curl_easy_getinfo(h, i, v); }
static inline CURLcode vc_easy_getinfo_off(CURL *h, CURLINFO i, curl_off_t *v) { return curl_easy_getinfo(h, i, v); }
static inline CURLcode vc_easy_getinfo_str(CURL *h, CURLINFO i, char **v) { return curl_easy_getinfo(h, i, v); }
static inline CURLcode vc_easy_getinfo_ptr(CURL *h, CURLINFO i, void **v) { return curl_easy_getinfo(h, i, v); }

/// What the socket and request callbacks below share with the transfer: the errno of a socket(2)
/// that failed, and, when `allow` is set, the check of each URL about to be requested (a redirect's
/// too) against the hosts allowed (`serve --allow-host`): `allow(allow_context, url)` returns 0 to
/// refuse, and `refused` records that it did.
typedef int (*vc_allow_fn)(void *context, const char *url);
typedef struct {
    int socket_errno;
    int refused;
    CURL *easy;
    vc_allow_fn allow;
    void *allow_context;
} vc_transfer_slot;

static inline int vc_url_allowed(vc_transfer_slot *slot) {
    if (!slot->allow) return 1;
    char *url = NULL;
    if (curl_easy_getinfo(slot->easy, CURLINFO_EFFECTIVE_URL, &url) != CURLE_OK || !url || !slot->allow(slot->allow_context, url)) {
        slot->refused = 1;
        return 0;
    }
    return 1;
}

/// CURLOPT_OPENSOCKETFUNCTION: opens the socket as libcurl does, and when socket(2) fails keeps
/// its errno: libcurl then reports only CURLE_COULDNT_CONNECT, "Couldn't connect to server", with
/// no errno (CURLINFO_OS_ERRNO stays 0), which blames the origin for what is this process's own
/// limit (EMFILE). A URL not allowed gets no socket: not even a connection reaches its host.
static curl_socket_t vc_open_socket(void *clientp, curlsocktype purpose, struct curl_sockaddr *address) {
    (void)purpose;
    vc_transfer_slot *slot = (vc_transfer_slot *)clientp;
    if (!vc_url_allowed(slot)) return CURL_SOCKET_BAD;
    curl_socket_t fd = socket(address->family, address->socktype, address->protocol);
    if (fd == CURL_SOCKET_BAD) slot->socket_errno = errno;
    return fd;
}
/// CURLOPT_PREREQFUNCTION: before each request, on a new connection or a reused one (through a
/// proxy, a redirect to another host can reuse the proxy's connection: no socket is opened).
static int vc_before_request(void *clientp, char *primary_ip, char *local_ip, int primary_port, int local_port) {
    (void)primary_ip; (void)local_ip; (void)primary_port; (void)local_port;
    return vc_url_allowed((vc_transfer_slot *)clientp) ? CURL_PREREQFUNC_OK : CURL_PREREQFUNC_ABORT;
}
/// CURLOPT_RESOLVER_START_FUNCTION: before a host name is looked up (not one already in the DNS
/// cache or given by --resolve). A URL not allowed gets no lookup either: no DNS query carries an
/// origin's chosen name out, and a name that does not resolve is still said as refused.
static int vc_before_resolve(void *resolver_state, void *reserved, void *userdata) {
    (void)resolver_state; (void)reserved;
    return vc_url_allowed((vc_transfer_slot *)userdata) ? 0 : 1;
}
static inline CURLcode vc_easy_set_transfer_slot(CURL *h, vc_transfer_slot *slot) {
    slot->easy = h;
    CURLcode rc = curl_easy_setopt(h, CURLOPT_OPENSOCKETFUNCTION, vc_open_socket);
    if (rc == CURLE_OK) rc = curl_easy_setopt(h, CURLOPT_OPENSOCKETDATA, (void *)slot);
    if (rc != CURLE_OK || !slot->allow) return rc;
    rc = curl_easy_setopt(h, CURLOPT_RESOLVER_START_FUNCTION, vc_before_resolve);
    if (rc == CURLE_OK) rc = curl_easy_setopt(h, CURLOPT_RESOLVER_START_DATA, (void *)slot);
    if (rc == CURLE_OK) rc = curl_easy_setopt(h, CURLOPT_PREREQFUNCTION, vc_before_request);
    return rc != CURLE_OK ? rc : curl_easy_setopt(h, CURLOPT_PREREQDATA, (void *)slot);
}

static inline CURLMcode vc_multi_setopt_long(CURLM *m, CURLMoption o, long v) { return curl_multi_setopt(m, o, v); }
#endif
