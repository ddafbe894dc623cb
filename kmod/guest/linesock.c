// SPDX-License-Identifier: GPL-2.0
/*
 * linesock: send each argument as one line to a Unix stream socket and print each reply line
 * (xrtd's control protocol in the guest, which has no client with Unix socket support).
 *
 *   linesock SOCKET JSON...        exit 1 if a reply is not {"ok":true,...}
 */
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	struct sockaddr_un addr = {.sun_family = AF_UNIX};
	char reply[8192];
	int fd, rc = 0;
	FILE *in;

	if (argc < 3) {
		fprintf(stderr, "usage: linesock SOCKET JSON...\n");
		return 2;
	}
	strncpy(addr.sun_path, argv[1], sizeof(addr.sun_path) - 1);
	fd = socket(AF_UNIX, SOCK_STREAM, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&addr, sizeof(addr))) {
		perror("linesock: connect");
		return 1;
	}
	in = fdopen(fd, "r");
	for (int i = 2; i < argc; i++) {
		if (dprintf(fd, "%s\n", argv[i]) < 0 || !fgets(reply, sizeof(reply), in)) {
			perror("linesock: exchange");
			return 1;
		}
		fputs(reply, stdout);
		if (!strstr(reply, "\"ok\":true") && !strstr(reply, "\"ok\": true"))
			rc = 1;
	}
	return rc;
}
