// SPDX-License-Identifier: MIT
#include "x86/boot.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "confine.h"
#include "log.h"
#include "vcpu.h"
#include "x86/acpi.h"
#include "x86/cpu_state.h"
#include "x86/layout.h"
#include "x86/vmlinux.h"

static int open_regular(const char *path, const char *what, uint64_t *size)
{
	struct stat st;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0) {
		int e = errno;

		log_err("cannot open %s '%s': %s", what, path, strerror(e));
		return -e;
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		log_err("%s '%s' is not a regular file", what, path);
		close(fd);
		return -EINVAL;
	}
	*size = (uint64_t)st.st_size;
	return fd;
}

/* pread() until len bytes arrived; a short file is an error. */
static int read_full(int fd, void *buf, uint64_t len, uint64_t off)
{
	uint8_t *p = buf;

	while (len) {
		ssize_t n = pread(fd, p, len > (1 << 30) ? (1 << 30) : len, (off_t)off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return -EIO;
		p += n;
		off += (uint64_t)n;
		len -= (uint64_t)n;
	}
	return 0;
}

int boot_open(struct boot_files *b, const char *kernel, const char *initrd, uint64_t mem_size)
{
	uint8_t head[BZIMAGE_SETUP_MAX];
	uint64_t low = mem_size < GUEST_MMIO_GAP_START ? mem_size : GUEST_MMIO_GAP_START;
	uint64_t head_len;
	int ret;

	memset(b, 0, sizeof(*b));
	b->initrd_fd = -1;
	b->kernel_fd = open_regular(kernel, "kernel", &b->kernel_file_size);
	if (b->kernel_fd < 0)
		return b->kernel_fd;
	head_len = b->kernel_file_size < sizeof(head) ? b->kernel_file_size : sizeof(head);
	ret = read_full(b->kernel_fd, head, head_len, 0);
	if (ret) {
		log_err("cannot read kernel '%s': %s", kernel, strerror(-ret));
		goto err;
	}
	if (vmlinux_is_elf(head, head_len)) {
		ret = vmlinux_parse(head, head_len < VMLINUX_HEAD_MAX ? head_len : VMLINUX_HEAD_MAX,
		                    b->kernel_file_size, &b->k);
		if (!ret)
			ret = read_full(b->kernel_fd, head, b->k.note_len, b->k.note_off);
		if (!ret)
			ret = vmlinux_check_notes(head, b->k.note_len, &b->k);
		if (ret) {
			if (!b->k.error)
				b->k.error = strerror(-ret);
			log_err("kernel '%s' is not a bootable x86-64 Linux vmlinux: %s; "
			        "give the vmlinux of a Linux build or its bzImage",
			        kernel, b->k.error);
			goto err;
		}
	} else if ((ret = bzimage_parse(head, head_len, b->kernel_file_size, &b->k))) {
		log_err("kernel '%s' is not a bootable x86-64 Linux bzImage: %s", kernel,
		        b->k.error);
		goto err;
	}
	if (b->k.mem_needed > low) {
		log_err("kernel '%s' needs %llu MiB of RAM to unpack; give --mem more", kernel,
		        (unsigned long long)(b->k.mem_needed >> 20) + 1);
		ret = -ENOMEM;
		goto err;
	}
	if (!initrd)
		return 0;
	b->initrd_fd = open_regular(initrd, "initrd", &b->initrd_size);
	if (b->initrd_fd < 0) {
		ret = b->initrd_fd;
		goto err;
	}
	if (b->initrd_size == 0) {
		log_err("initrd '%s' is empty", initrd);
		ret = -EINVAL;
		goto err;
	}
	ret = bzimage_place_initrd(&b->k, low, b->initrd_size, &b->initrd_addr);
	if (ret) {
		log_err("initrd '%s' (%llu MiB) does not fit in guest RAM beside the kernel; "
		        "give --mem more",
		        initrd, (unsigned long long)(b->initrd_size >> 20));
		goto err;
	}
	return 0;
err:
	boot_close(b);
	return ret;
}

void boot_close(struct boot_files *b)
{
	if (b->loader_running && boot_load_images_wait(b))
		log_debug("image loader failed during shutdown");
	if (b->kernel_fd > 0)
		close(b->kernel_fd);
	if (b->initrd_fd > 0)
		close(b->initrd_fd);
	b->kernel_fd = b->initrd_fd = -1;
}

static int load_file(const struct guest_mem *mem, int fd, uint64_t gpa, uint64_t len, uint64_t off,
                     const char *what)
{
	void *dst = gpa_ptr(mem, gpa, len);
	int ret;

	if (!dst) {
		log_err("%s does not fit in guest RAM at %#llx", what, (unsigned long long)gpa);
		return -EFAULT;
	}
	ret = read_full(fd, dst, len, off);
	if (ret)
		log_err("cannot read %s: %s", what, strerror(-ret));
	return ret;
}

static void *loader_thread(void *arg)
{
	struct boot_files *b = arg;

	pthread_setname_np(pthread_self(), "loader");
	if (confine_enter(ROLE_WORKER)) {
		b->load_result = -EPERM;
		return NULL;
	}
	/*
	 * Memory past a segment's file part is left as it is: a booting VMM's
	 * guest RAM is fresh (a reboot ends the process) and so already zero.
	 */
	for (unsigned i = 0; i < b->k.nr_seg && !b->load_result; i++)
		b->load_result = load_file(b->mem, b->kernel_fd, b->k.seg[i].gpa,
		                           b->k.seg[i].filesz, b->k.seg[i].offset, "kernel");
	if (!b->load_result && b->initrd_fd >= 0)
		b->load_result = load_file(b->mem, b->initrd_fd, b->initrd_addr, b->initrd_size, 0,
		                           "initrd");
	log_debug("kernel and initrd in guest memory (%llu KiB)",
	          (unsigned long long)((b->k.kernel_size + b->initrd_size) >> 10));
	return NULL;
}

int boot_load_images_start(struct boot_files *b, const struct guest_mem *mem)
{
	int ret;

	b->mem = mem;
	ret = pthread_create(&b->loader, NULL, loader_thread, b);
	if (ret) {
		log_err("cannot start the image loader: %s", strerror(ret));
		return -ret;
	}
	b->loader_running = 1;
	return 0;
}

int boot_load_images_wait(struct boot_files *b)
{
	if (!b->loader_running)
		return -EINVAL;
	pthread_join(b->loader, NULL);
	b->loader_running = 0;
	return b->load_result;
}

int boot_setup(struct boot_files *b, struct vm *vm, const char *cmdline)
{
	/* Built in place: a host-side buffer would only add to the VMM's RSS. */
	uint8_t *acpi = gpa_ptr(&vm->mem, ACPI_TABLES_ADDR, ACPI_TABLES_SIZE);
	struct boot_info info = {
		.cmdline_addr = BOOT_CMDLINE_ADDR,
		.cmdline = cmdline,
		.rsdp_addr = ACPI_TABLES_ADDR,
	};
	struct boot_params bp;
	long acpi_len;
	int ret;

	if (b->initrd_fd >= 0) {
		info.initrd_addr = b->initrd_addr;
		info.initrd_size = b->initrd_size;
	}
	if (!acpi) {
		log_err("guest RAM too small for the ACPI tables");
		return -EFAULT;
	}
	acpi_len = acpi_build(acpi, ACPI_TABLES_SIZE, ACPI_TABLES_ADDR, vm->nr_vcpus);
	if (acpi_len < 0) {
		log_err("cannot build ACPI tables: %s", strerror((int)-acpi_len));
		return (int)acpi_len;
	}
	ret = bzimage_boot_params(&b->k, &vm->mem, &info, &bp);
	if (ret) {
		log_err("kernel command line is %zu bytes; this kernel accepts at most %u",
		        strlen(cmdline), b->k.hdr.cmdline_size);
		return ret;
	}
	if (guest_mem_write(&vm->mem, BOOT_CMDLINE_ADDR, cmdline, strlen(cmdline) + 1) ||
	    guest_mem_write(&vm->mem, BOOT_PARAMS_ADDR, &bp, sizeof(bp)) ||
	    cpu_state_tables(&vm->mem)) {
		log_err("guest RAM too small for the boot structures");
		return -EFAULT;
	}
	for (unsigned i = 0; i < vm->nr_vcpus; i++) {
		ret = vcpu_setup_boot(&vm->vcpus[i], b->k.entry, BOOT_PARAMS_ADDR);
		if (ret)
			return ret;
	}
	return 0;
}
