#!/usr/bin/env bash
# Create or update a virtual environment with this workbook installed; the Makefile's targets call it.
#
#   tools/venv.sh VENV PYTHON EXTRAS [CONSTRAINTS]     e.g.  tools/venv.sh .venv python3 lab,test
#
# * The Python must be 3.11 to 3.13 (the Makefile refuses any other before calling this; here it is
#   checked again for direct calls; docs/decisions.md, "Pythons"). The pins come from CONSTRAINTS,
#   else from constraints.txt.
# * VENV/.installed is written last, only after pip succeeded; it records the Python, the
#   constraints file and the extras. A VENV without it is what an interrupted or failed install left:
#   it is deleted and made again, never reused. A failed install deletes VENV at once.
# * An up-to-date VENV (stamp newer than pyproject.toml and its constraints file, extras included)
#   is left alone; an older one, or one missing an extra, is updated in place with pip.
# * PYTHON_GIVEN=1 (the Makefile sets it when PYTHON= is on make's command line): a VENV made with
#   another Python version is made again with this one.
set -euo pipefail

usage="usage: tools/venv.sh VENV PYTHON EXTRAS [CONSTRAINTS]"
venv=${1:?$usage} python=${2:?$usage} extras=${3?$usage} constraints=${4:-}
stamp="$venv/.installed"
supported="3.11 3.12 3.13"
cd "$(dirname "$0")/.."

version_of() { "$1" -c 'import sys; print("%d.%d.%d" % sys.version_info[:3])' 2>/dev/null || true; }
minor() { echo "${1%.*}"; }
stamp_field() { sed -n "s/^$1=//p" "$stamp"; }
union() { echo "$1,$2" | tr ',' '\n' | sed '/^$/d' | sort -u | paste -sd, -; }
contains_all() {  # every extra in $2 is in $1
  local have=",$1," extra
  for extra in ${2//,/ }; do [[ $have == *",$extra,"* ]] || return 1; done
}
fail() {  # a failed install is never reused
  rm -rf "$venv"
  echo "$venv: $1; removed it, so the next run starts afresh" >&2
  exit 1
}
install() {  # install the package with $1 extras, pinned by $2; then write the stamp
  local pins=$2 spec="."
  [ -n "$1" ] && spec=".[$1]"
  echo "installing the workbook (-e \"$spec\", pinned by $pins) in $venv with Python $version"
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check -c "$pins" -e "$spec" \
    || fail "pip install failed"
  printf 'python=%s\nconstraints=%s\nextras=%s\n' "$version" "$pins" "$1" > "$stamp"
}

if [ -f "$stamp" ]; then
  had=$(stamp_field python) pins=$(stamp_field constraints) have=$(stamp_field extras)
  if [ -z "$had" ]; then  # an empty stamp from before this script: ask the venv, reinstall the extras
    had=$(version_of "$venv/bin/python") pins=constraints.txt have=""
  fi
  given=$(version_of "$python")
  if [ "${PYTHON_GIVEN:-}" = 1 ] && [ -n "$given" ] && [ "$(minor "$given")" != "$(minor "$had")" ]; then
    echo "$venv has Python $had; making it again with $python (Python $given)"
    rm -rf "$venv"
  else
    version=$had
    pins=${constraints:-$pins}
    if [ "$stamp" -nt pyproject.toml ] && [ "$stamp" -nt "$pins" ] && contains_all "$have" "$extras"; then
      exit 0
    fi
    install "$(union "$have" "$extras")" "$pins"
    exit 0
  fi
elif [ -e "$venv" ]; then
  echo "$venv has no .installed (an install that failed or was interrupted): removing it"
  rm -rf "$venv"
fi

version=$(version_of "$python")
case " $supported " in
  *" $(minor "${version:-none}") "*) ;;
  *) if [ -n "$version" ]; then what="Python $version"; else what="not a Python that runs"; fi
     echo "$python is $what: this workbook needs Python 3.11 to 3.13; pass one, e.g." \
          "make lab PYTHON=python3.12" >&2
     exit 2 ;;
esac
"$python" -m venv "$venv" \
  || fail "'$python -m venv' failed (on Debian or Ubuntu: sudo apt-get install python$(minor "$version")-venv)"
install "$extras" "${constraints:-constraints.txt}"
