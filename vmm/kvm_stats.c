// SPDX-License-Identifier: MIT
#include "kvm_stats.h"

#include <errno.h>
#include <linux/kvm.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

static int stats_find(int sfd, const struct kvm_stats_header *h, const char *name, uint64_t *sum)
{
	size_t desc_size = sizeof(struct kvm_stats_desc) + h->name_size;
	uint8_t *descs;
	int ret = -ENOENT;

	if (h->num_desc == 0 || h->num_desc > 4096 || h->name_size == 0 || h->name_size > 1024)
		return -EINVAL;
	descs = malloc(desc_size * h->num_desc);
	if (!descs)
		return -ENOMEM;
	if (pread(sfd, descs, desc_size * h->num_desc, h->desc_offset) !=
	    (ssize_t)(desc_size * h->num_desc)) {
		free(descs);
		return -EIO;
	}
	for (uint32_t i = 0; i < h->num_desc; i++) {
		struct kvm_stats_desc *d = (struct kvm_stats_desc *)(descs + i * desc_size);
		uint64_t v;

		if (strncmp(d->name, name, h->name_size) != 0 || d->size != 1)
			continue;
		if (pread(sfd, &v, sizeof(v), h->data_offset + d->offset) != sizeof(v)) {
			ret = -EIO;
			break;
		}
		*sum += v;
		ret = 0;
		break;
	}
	free(descs);
	return ret;
}

int kvm_stats_add(int fd, const char *name, uint64_t *sum)
{
	struct kvm_stats_header h;
	int sfd = ioctl(fd, KVM_GET_STATS_FD, NULL);
	int ret;

	if (sfd < 0)
		return -errno;
	if (pread(sfd, &h, sizeof(h), 0) != sizeof(h))
		ret = -EIO;
	else
		ret = stats_find(sfd, &h, name, sum);
	close(sfd);
	return ret;
}
