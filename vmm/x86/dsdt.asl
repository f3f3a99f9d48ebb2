/*
 * The guest's DSDT (compiled by iasl at build time; see the Makefile).
 * Hardware-reduced ACPI: no GPE blocks, so the VMGenID device's
 * notification comes through a Generic Event Device's interrupt.
 */
#include "layout.h"

DefinitionBlock ("dsdt.aml", "DSDT", 2, "HUSK  ", "HUSKDSDT", 1)
{
    /* The sleep type power-off writes to PM1a_CNT. */
    Name (_S5, Package (2) { 5, 0 })

    Scope (\_SB)
    {
        /*
         * VM Generation ID: 16 bytes the VMM changes when the guest is
         * restored from a snapshot; Linux's vmgenid driver (matched by the
         * compatible ID) reseeds the kernel's RNG when notified.
         */
        Device (VGEN)
        {
            Name (_HID, "HUSK0001")
            Name (_CID, "VM_GEN_COUNTER")
            Name (_DDN, "VM_GEN_COUNTER")
            Method (ADDR, 0, NotSerialized)
            {
                Return (Package (2) { VMGENID_ADDR, 0 })
            }
        }

        /* Generic Event Device: one edge interrupt, turned into the notification. */
        Device (GED)
        {
            Name (_HID, "ACPI0013")
            Name (_UID, 0)
            Name (_CRS, ResourceTemplate ()
            {
                Interrupt (ResourceConsumer, Edge, ActiveHigh, Exclusive) { GED_GSI }
            })
            Method (_EVT, 1, Serialized)
            {
                If (Arg0 == GED_GSI)
                {
                    Notify (\_SB.VGEN, 0x80)
                }
            }
        }
    }
}
