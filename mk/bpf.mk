# Shared rules for BPF objects and skeletons (libbpf-bootstrap style), included by component
# Makefiles. The includer sets OBJDIR (where objects and skeletons go) and TOP/BUILD come from
# the top-level Makefile.
TOP ?= $(abspath $(dir $(lastword $(MAKEFILE_LIST)))/..)
BUILD ?= $(TOP)/build
BPF_CLANG ?= clang
BPFTOOL ?= bpftool
BPF_INCLUDES := -I$(BUILD)/include -I$(TOP)/include
BPF_CFLAGS := -g -O2 -target bpf -D__TARGET_ARCH_x86 -Wall $(BPF_INCLUDES)

$(BUILD)/include/vmlinux.h:
	@mkdir -p $(dir $@)
	$(BPFTOOL) btf dump file /sys/kernel/btf/vmlinux format c > $@.tmp && mv $@.tmp $@

$(OBJDIR)/%.bpf.o: %.bpf.c $(BUILD)/include/vmlinux.h | $(OBJDIR)
	$(BPF_CLANG) $(BPF_CFLAGS) -c $< -o $@

$(OBJDIR)/%.skel.h: $(OBJDIR)/%.bpf.o
	$(BPFTOOL) gen skeleton $< > $@.tmp && mv $@.tmp $@

$(OBJDIR):
	@mkdir -p $@
