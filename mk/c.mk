# The flags of every C part built for user space (daemons, tools, workloads, the guest tools):
# included by each component's Makefile before its rules. Interface headers come from the one
# top-level include/ (#include "xtune/knob.h"). Components add their own CPPFLAGS/LDLIBS.
TOP ?= $(abspath $(dir $(lastword $(MAKEFILE_LIST)))/..)
BUILD ?= $(TOP)/build
CFLAGS ?= -O2 -g
CFLAGS += -Wall -Wextra -Werror -std=gnu11
CPPFLAGS += -I$(TOP)/include
