# mk/guard.mk - the one gate for the values you hand make. A recipe is shell
# text: make pastes $(VAR) into it before the shell parses it, so a value with
# a quote, a `;` or a `$(...)` in it would run as a command wherever some
# recipe forgot to quote it (and quoting cannot be complete: a value holding
# the quote itself escapes it). Instead of relying on every recipe, every
# value that comes from outside (make's command line, or the environment for
# a variable the makefiles use) is checked here, once, before any of it is
# expanded; a character the shell would read as syntax stops make with one
# line and exit 2. Values are read with $(value ...), so a `$(shell ...)` in
# one is never expanded by the check itself.

kv_guard_lp := (
kv_guard_rp := )
kv_guard_hash := \#
kv_guard_dollar := $$
define kv_guard_nl


endef
# what the shell treats as syntax, quoting, expansion or a glob
kv_guard_bad := ' " ` \ ; & | < > { } * ? [ ] $(kv_guard_dollar) $(kv_guard_lp) $(kv_guard_rp) $(kv_guard_hash)
kv_guard_ok := letters, digits, spaces and - _ . , / = : + @ % ~ ^ !

# the variables the makefiles define as knobs (?=) or read anywhere as $(NAME);
# an environment variable counts only when it is one of them (LS_COLORS and the
# like never reach a recipe)
kv_guard_files := $(firstword $(MAKEFILE_LIST)) $(KV_MK_FILES)
kv_guard_names := $(filter-out MAKE%,$(shell sed -n -e 's/^\([A-Za-z_][A-Za-z0-9_]*\)[[:space:]]*?=.*/\1/p' \
  -e 's/[^$$]*\$$[({]\([A-Za-z_][A-Za-z0-9_]*\)[)}]/\1\n/gp' $(kv_guard_files) | sed -n '/^[A-Za-z_][A-Za-z0-9_]*$$/p' | sort -u))

kv_guard_from_outside = $(or $(filter command line,$(origin $1)),$(and $(filter environment%,$(origin $1)),$(filter $1,$(kv_guard_names))))
# (NAME) the first bad character of its raw value, or empty
kv_guard_first = $(firstword $(if $(findstring $(kv_guard_nl),$(value $1)),newline) \
  $(foreach c,$(kv_guard_bad),$(if $(findstring $c,$(value $1)),$c)))

kv_guard_vars := $(foreach v,$(.VARIABLES),$(if $(call kv_guard_from_outside,$v),$v))
$(foreach v,$(kv_guard_vars),$(if $(call kv_guard_first,$v),$(error $v holds $(call kv_guard_first,$v): make would hand it to the shell inside a recipe; a value may hold only $(kv_guard_ok))))
