# A component made of parts: every sub-folder with a Makefile is built (and cleaned) in turn.
SUBDIRS := $(patsubst %/Makefile,%,$(wildcard */Makefile))

.PHONY: all clean
all clean:
	@for d in $(SUBDIRS); do $(MAKE) --no-print-directory -C $$d $@ || exit 1; done
