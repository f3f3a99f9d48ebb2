/* SPDX-License-Identifier: MIT */
#ifndef HUSK_DEVICES_SERIAL_H
#define HUSK_DEVICES_SERIAL_H

#include <stddef.h>
#include <stdint.h>

struct vm;
struct serial;

/*
 * A 16550A UART at port base raising ISA irq; what the guest transmits is
 * written to out_fd (not owned). Returns NULL and logs on failure.
 */
struct serial *serial_create(struct vm *vm, uint16_t base, unsigned irq, int out_fd);

/*
 * With out_fd a file: once it holds max_bytes it is emptied and starts
 * again with a line saying so (a console the guest cannot grow without end).
 */
void serial_limit(struct serial *s, uint64_t max_bytes);

/* Queues bytes the guest will receive (console input); drops what does not fit. */
size_t serial_receive(struct serial *s, const uint8_t *data, size_t len);

void serial_destroy(struct serial *s);

#endif
