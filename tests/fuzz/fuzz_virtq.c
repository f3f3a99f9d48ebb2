// SPDX-License-Identifier: MIT
/*
 * Fuzzes the virtqueue walker: the input becomes a guest's descriptor table,
 * avail ring and buffers; every chain it yields is read and written in full.
 */
#include <stdint.h>
#include <string.h>

#include "guest_mem.h"
#include "virtio/virtq.h"

#define QSIZE 64
#define MEM_SIZE (2U << 20)

static struct guest_mem mem;
static struct virtq_chain chain;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct virtq vq = {.size = QSIZE, .desc_gpa = 0, .avail_gpa = 0x1000, .used_gpa = 0x2000};
	static uint8_t scratch[65536];
	uint8_t *base;

	if (!mem.nr_regions && guest_mem_init(&mem, MEM_SIZE))
		return 0;
	base = gpa_ptr(&mem, 0, 0x3000);
	memset(base, 0, 0x3000);
	/* Descriptors, then the avail ring, straight from the input. */
	memcpy(base, data, size < 0x1000 + 4 + 2 * QSIZE ? size : 0x1000 + 4 + 2 * QSIZE);
	vq.event_idx = size && (data[0] & 1);
	if (virtq_enable(&vq, &mem))
		return 0;
	for (int i = 0; i < 2 * QSIZE; i++) {
		int ret = virtq_pop(&vq, &mem, &chain);

		if (ret == 0)
			break;
		if (ret < 0)
			continue;
		virtq_chain_read(&chain, 0, scratch, sizeof(scratch));
		virtq_chain_write(&chain, 0, scratch,
		                  chain.in_len < sizeof(scratch) ? chain.in_len : sizeof(scratch));
		virtq_push(&vq, chain.head, chain.in_len);
		virtq_should_signal(&vq);
	}
	return 0;
}
