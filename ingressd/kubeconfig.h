/*
 * How ingressd reaches the Kubernetes API: the server's URL, the CA that
 * verifies it, and the credentials, from a kubeconfig file (running outside
 * a cluster) or from the pod's service account (in-cluster).
 *
 * Supported: a kubeconfig's current-context (or a named one) -> cluster
 * server (https only), certificate-authority-data or certificate-authority
 * (a file; relative paths are relative to the kubeconfig's directory, as
 * kubectl reads them), and user token, tokenFile, client-certificate(-data)
 * with client-key(-data). Refused with a message naming the key: http://
 * servers, insecure-skip-tls-verify: true (ingressd never talks to an
 * unverified API server), exec and auth-provider plugins, username and
 * password. Without a CA the system's store verifies the server.
 *
 * The token file (tokenFile, or the service account's projected token,
 * which the kubelet rotates) is re-read by sws_kube_conn_refresh_token()
 * when its inode, size or mtime changes; the client calls it before every
 * request.
 *
 * Ownership: the struct owns every string and buffer in it
 * (sws_kube_conn_free). Caller: ingressd (its main, then the client).
 */
#ifndef SWS_INGRESSD_KUBECONFIG_H
#define SWS_INGRESSD_KUBECONFIG_H

#include <stddef.h>
#include <sys/types.h>
#include <time.h>

#define SWS_KUBE_SA_DIR "/var/run/secrets/kubernetes.io/serviceaccount"

typedef struct sws_kube_conn {
    char *server;             /* "https://host:port[/prefix]", no trailing '/' */
    char *ca_pem;             /* PEM; NULL: the system's CA store */
    size_t ca_len;
    char *cert_pem;           /* client certificate and key (PEM), or NULL */
    size_t cert_len;
    char *key_pem;
    size_t key_len;
    char *token;              /* the bearer token, or NULL */
    char *token_file;         /* where it comes from; NULL: fixed */
    dev_t token_dev;          /* the file the token was read from */
    ino_t token_ino;
    off_t token_size;
    struct timespec token_mtime;
    char source[320];         /* "kubeconfig FILE, context NAME" / "in-cluster", for logs */
} sws_kube_conn_t;

/* Read path; context NULL: the file's current-context. 0, or -1 with err
 * ("FILE:LINE:COL: users[0].user.exec: ..."); *c is then empty. */
int sws_kubeconfig_load(sws_kube_conn_t *c, const char *path, const char *context, char *err,
                        size_t errlen);

/* The in-cluster connection: host and port are KUBERNETES_SERVICE_HOST
 * and KUBERNETES_SERVICE_PORT (passed by the caller, which reads the
 * environment), sa_dir the service account's directory (SWS_KUBE_SA_DIR;
 * another in tests): ca.crt and token are read; the watched namespace is
 * --namespace's, not the pod's.
 * 0, or -1 with err; *c is then empty. */
int sws_kube_conn_incluster(sws_kube_conn_t *c, const char *host, const char *port,
                            const char *sa_dir, char *err, size_t errlen);

/* Re-read the token file if it changed since it was read. 0 (the token
 * is current), 1 (it was re-read), or -1 with err: the old token stays. */
int sws_kube_conn_refresh_token(sws_kube_conn_t *c, char *err, size_t errlen);

void sws_kube_conn_free(sws_kube_conn_t *c);

#endif
