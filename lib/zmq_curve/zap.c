// SPDX-License-Identifier: MIT
/*
 * ZAP handler (ZeroMQ RFC 27) for a CURVE server: accepts a client whose public key is in
 * DIR/authorized_clients. libzmq 4.3 has no allow-list of its own and, without a handler bound,
 * lets every CURVE client in: xt_zap_start must run before the server binds.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <zmq.h>

#include "xtune/zmq_curve.h"

#define ZAP_FRAMES 7 /* version, request id, domain, address, identity, mechanism, key */

static uint8_t allowed[XT_MAX_CLIENT_KEYS][32];
static int nr_allowed;
static void *zap;
static pthread_t thread;
static bool started;

static bool authorized(zmq_msg_t *mechanism, zmq_msg_t *key)
{
	int i;

	if (zmq_msg_size(mechanism) != 5 || memcmp(zmq_msg_data(mechanism), "CURVE", 5) ||
	    zmq_msg_size(key) != 32)
		return false;
	for (i = 0; i < nr_allowed; i++)
		if (!memcmp(allowed[i], zmq_msg_data(key), 32))
			return true;
	return false;
}

/* A client retries every 100 ms: say it once per key, then again at most every 10 s. */
static void log_refusal(zmq_msg_t *address, zmq_msg_t *key)
{
	static uint8_t last[32];
	static time_t last_time;
	char z85[XT_Z85_KEY_LEN + 1] = "(none)";
	time_t now = time(NULL);

	if (zmq_msg_size(key) == 32) {
		if (!memcmp(last, zmq_msg_data(key), 32) && now - last_time < 10)
			return;
		memcpy(last, zmq_msg_data(key), 32);
		zmq_z85_encode(z85, zmq_msg_data(key), 32);
	}
	last_time = now;
	fprintf(stderr,
		"%s: refused ZeroMQ client %.*s: CURVE key %s is not in authorized_clients\n",
		program_invocation_short_name, (int)zmq_msg_size(address),
		(const char *)zmq_msg_data(address), z85);
}

static void reply(zmq_msg_t *request_id, bool ok)
{
	const char *status = ok ? "200" : "400", *text = ok ? "OK" : "key not authorized";

	zmq_send(zap, "1.0", 3, ZMQ_SNDMORE);
	zmq_send(zap, zmq_msg_data(request_id), zmq_msg_size(request_id), ZMQ_SNDMORE);
	zmq_send(zap, status, 3, ZMQ_SNDMORE);
	zmq_send(zap, text, strlen(text), ZMQ_SNDMORE);
	zmq_send(zap, "", 0, ZMQ_SNDMORE); /* user id */
	zmq_send(zap, "", 0, 0);	   /* metadata */
}

static void *serve(void *arg)
{
	zmq_msg_t part[ZAP_FRAMES];
	int n, more, i;
	bool ok;

	(void)arg;
	for (i = 0; i < ZAP_FRAMES; i++)
		zmq_msg_init(&part[i]);
	for (;;) {
		/* Extra frames (none in RFC 27) land in the last slot; fewer make a refusal. */
		n = 0;
		do {
			if (zmq_msg_recv(&part[n < ZAP_FRAMES ? n : ZAP_FRAMES - 1], zap, 0) < 0)
				goto out; /* ETERM: the context is shutting down */
			more = zmq_msg_more(&part[n < ZAP_FRAMES ? n : ZAP_FRAMES - 1]);
			n++;
		} while (more);
		ok = n == ZAP_FRAMES && authorized(&part[5], &part[6]);
		if (!ok && n == ZAP_FRAMES)
			log_refusal(&part[3], &part[6]);
		reply(n > 1 ? &part[1] : &part[0], ok);
	}
out:
	for (i = 0; i < ZAP_FRAMES; i++)
		zmq_msg_close(&part[i]);
	zmq_close(zap);
	return NULL;
}

int xt_zap_start(void *ctx, const char *dir)
{
	nr_allowed = xt_keys_authorized(dir, allowed, XT_MAX_CLIENT_KEYS);
	if (nr_allowed < 0)
		return -1;
	zap = zmq_socket(ctx, ZMQ_REP);
	if (!zap || zmq_bind(zap, "inproc://zeromq.zap.01")) {
		fprintf(stderr, "%s: cannot start the ZAP handler: %s\n",
			program_invocation_short_name, zmq_strerror(zmq_errno()));
		if (zap)
			zmq_close(zap);
		return -1;
	}
	/*
	 * The handler thread is born with every signal blocked: a signal handled there would
	 * end its receive with EINTR, and a server socket whose ZAP handler is gone admits
	 * any CURVE client.
	 */
	sigset_t all, old;
	int rc;

	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	rc = pthread_create(&thread, NULL, serve, NULL);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc) {
		fprintf(stderr, "%s: cannot start the ZAP handler thread\n",
			program_invocation_short_name);
		zmq_close(zap);
		return -1;
	}
	started = true;
	return 0;
}

/* Call after zmq_ctx_shutdown: the handler's receive then fails with ETERM and it returns. */
void xt_zap_stop(void)
{
	if (started)
		pthread_join(thread, NULL);
	started = false;
}
