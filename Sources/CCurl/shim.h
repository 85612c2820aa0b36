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

/// CURLOPT_OPENSOCKETFUNCTION: opens the socket as libcurl does, and when socket(2) fails keeps
/// its errno in *clientp (an int): libcurl then reports only CURLE_COULDNT_CONNECT, "Couldn't
/// connect to server", with no errno (CURLINFO_OS_ERRNO stays 0), which blames the origin for
/// what is this process's own limit (EMFILE).
static curl_socket_t vc_open_socket(void *clientp, curlsocktype purpose, struct curl_sockaddr *address) {
    (void)purpose;
    curl_socket_t fd = socket(address->family, address->socktype, address->protocol);
    if (fd == CURL_SOCKET_BAD && clientp) *(int *)clientp = errno;
    return fd;
}
static inline CURLcode vc_easy_keep_socket_errno(CURL *h, int *slot) {
    CURLcode rc = curl_easy_setopt(h, CURLOPT_OPENSOCKETFUNCTION, vc_open_socket);
    return rc != CURLE_OK ? rc : curl_easy_setopt(h, CURLOPT_OPENSOCKETDATA, (void *)slot);
}

static inline CURLMcode vc_multi_setopt_long(CURLM *m, CURLMoption o, long v) { return curl_multi_setopt(m, o, v); }
#endif
