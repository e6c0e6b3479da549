/*
 * Session tickets under the region's keys (worker/tls_tickets.h): the
 * OpenSSL 3 ticket callback, RFC 5077's layout (key name, IV, AES-256-CBC,
 * HMAC-SHA256), as OpenSSL's own default keys would seal them.
 */
#include "worker/tls_tickets.h"

#include "core/err.h"

#include <string.h>

#include <openssl/core_names.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/rand.h>

/* The callback's return values (SSL_CTX_set_tlsext_ticket_key_evp_cb(3)). */
#define TICKET_NONE 0  /* no ticket issued / not ours: a full handshake */
#define TICKET_OK 1
#define TICKET_RENEW 2 /* opened: issue a new ticket (an older key, or TLS 1.3) */

/* Where a context keeps its keys: one ex_data index per process, made at
 * the first attach (workers are single-threaded). */
static int keys_index = -1;

static int mac_init(EVP_MAC_CTX *hctx, const sws_ticket_key_t *k)
{
    OSSL_PARAM params[] = {
        OSSL_PARAM_construct_octet_string(OSSL_MAC_PARAM_KEY, (void *)k->hmac,
                                          SWS_TICKET_HMAC_LEN),
        OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, (char *)"SHA256", 0),
        OSSL_PARAM_construct_end(),
    };
    return EVP_MAC_CTX_set_params(hctx, params);
}

static int seal(unsigned char name[16], unsigned char *iv, EVP_CIPHER_CTX *cctx,
                EVP_MAC_CTX *hctx, const sws_ticket_key_t *k)
{
    const EVP_CIPHER *cipher = EVP_aes_256_cbc();
    if (RAND_bytes(iv, EVP_CIPHER_get_iv_length(cipher)) != 1)
        return TICKET_NONE;
    memcpy(name, k->name, SWS_TICKET_NAME_LEN);
    if (EVP_EncryptInit_ex(cctx, cipher, NULL, k->aes, iv) != 1 || mac_init(hctx, k) != 1)
        return TICKET_NONE;
    return TICKET_OK;
}

/* TLS 1.3: every resumption gets a new ticket, as RFC 8446 (C.4) advises
 * single-use tickets and as nginx and HAProxy do; OpenSSL sends one after
 * a resumed handshake only when asked. It also gives the client an answer
 * right after its Finished: without one, a client that leaves Nagle on
 * (Python's) held its request 40 ms for our delayed ACK. TLS 1.2 renews
 * only tickets under an older key. */
static int open_ticket(const SSL *ssl, unsigned char name[16], unsigned char *iv,
                       EVP_CIPHER_CTX *cctx, EVP_MAC_CTX *hctx,
                       const sws_tickets_snapshot_t *snap)
{
    const sws_ticket_key_t *k = sws_tickets_find(snap, name);
    if (k == NULL)
        return TICKET_NONE;
    if (mac_init(hctx, k) != 1 || EVP_DecryptInit_ex(cctx, EVP_aes_256_cbc(), NULL, k->aes, iv) != 1)
        return TICKET_NONE;
    return k == &snap->keys[0] && SSL_version(ssl) < TLS1_3_VERSION ? TICKET_OK : TICKET_RENEW;
}

/* Never -1 (which fails the handshake): a ticket we cannot seal is not
 * sent, one we cannot open is ignored, and the client gets a full
 * handshake either way. */
static int ticket_cb(SSL *ssl, unsigned char name[16], unsigned char *iv, EVP_CIPHER_CTX *cctx,
                     EVP_MAC_CTX *hctx, int enc)
{
    const sws_tickets_t *keys = SSL_CTX_get_ex_data(SSL_get_SSL_CTX(ssl), keys_index);
    sws_tickets_snapshot_t snap;
    if (keys == NULL || sws_tickets_read(keys, &snap) != 0)
        return TICKET_NONE;
    int rc = enc ? seal(name, iv, cctx, hctx, &snap.keys[0])
                 : open_ticket(ssl, name, iv, cctx, hctx, &snap);
    sws_tickets_forget(&snap);
    /* A refusal above may leave an OpenSSL error queued; the handshake
     * goes on, and a stale entry would be blamed on the next failure. */
    if (rc == TICKET_NONE)
        ERR_clear_error();
    return rc;
}

int sws_tls_tickets_attach(SSL_CTX *ctx, const sws_tickets_t *keys, uint64_t period_ms,
                           char *err, size_t errlen)
{
    uint64_t lifetime_s = sws_tickets_lifetime_ms(period_ms) / 1000u;

    if (keys_index < 0) {
        keys_index = SSL_CTX_get_ex_new_index(0, NULL, NULL, NULL, NULL);
        if (keys_index < 0)
            return sws_errf(err, errlen, "TLS tickets: no SSL_CTX ex_data index");
    }
    if (SSL_CTX_set_ex_data(ctx, keys_index, (void *)keys) != 1 ||
        SSL_CTX_set_tlsext_ticket_key_evp_cb(ctx, ticket_cb) != 1)
        return sws_errf(err, errlen, "TLS tickets: cannot install the ticket callback");
    /* Not longer than the ring accepts a ticket: a client offering an
     * expired session wastes a round of ticket decryption at best. */
    SSL_CTX_set_timeout(ctx, lifetime_s > 0 ? (long)lifetime_s : 1);
    /* A session cached by one worker would resume there only; tickets
     * resume everywhere. */
    SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
    SSL_CTX_clear_options(ctx, SSL_OP_NO_TICKET);
    return 0;
}
