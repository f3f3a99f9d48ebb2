// SPDX-License-Identifier: MIT
/* The serial console's file cap: the guest cannot grow console.log without end. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "devices/serial.h"
#include "unit.h"
#include "vm.h"

UNIT_TEST(serial_console_file_is_capped)
{
	char path[] = "/tmp/husk-serial-XXXXXX", buf[512];
	struct vm vm;
	struct serial *s;
	struct stat st;
	int fd = mkstemp(path);
	ssize_t n;

	CHECK(fd >= 0);
	unlink(path);
	memset(&vm, 0, sizeof(vm));
	vm.vm_fd = -1;
	vm.stop_fd = -1;
	vm.pio.name = "pio";
	s = serial_create(&vm, 0x3f8, 4, fd);
	CHECK(s);
	serial_limit(s, 100);
	/* 250 bytes through the transmit register, as the guest's driver writes them. */
	for (int i = 0; i < 250; i++) {
		uint8_t c = (uint8_t)('a' + i % 26);

		CHECK(bus_access(&vm.pio, 0x3f8, &c, 1, 1) == 0);
	}
	CHECK(fstat(fd, &st) == 0);
	CHECK(st.st_size <= 100 + 80);
	n = pread(fd, buf, sizeof(buf) - 1, 0);
	CHECK(n == st.st_size);
	buf[n] = '\0';
	CHECK(!strncmp(buf, "[husk-vmm: the console reached 100 bytes", 40));
	/* The latest output is what is kept: byte 249 was 'a' + 249 % 26. */
	CHECK(buf[n - 1] == 'a' + 249 % 26);
	serial_destroy(s);
	close(fd);
}
