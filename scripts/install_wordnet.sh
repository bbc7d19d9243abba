#!/usr/bin/env bash
# Make the WordNet 3.0 database (needed by METEOR) readable by NLTK, offline, inside a virtual environment.
#
#   bash scripts/install_wordnet.sh [VENV]     (VENV: argument, else $CLINRAG_VENV, else .venv;
#                                              a relative path is taken from the repository root)
#
# The database comes from the Debian packages wordnet-base + wordnet-sense-index (/usr/share/wordnet).
# NLTK looks in sys.prefix/nltk_data, so copying to $VENV/nltk_data/corpora/wordnet needs no NLTK_DATA.
# Debian ships no `lexnames` file, which NLTK's reader requires: it is written here from the fixed
# WordNet 3.0 table (lexnames(5WN)). Safe to run again: the directory is rebuilt and swapped in whole.
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=${1:-${CLINRAG_VENV:-.venv}}
SOURCE=${CLINRAG_WORDNET_SOURCE:-/usr/share/wordnet}
TARGET="$VENV/nltk_data/corpora/wordnet"
# The files NLTK's WordNetCorpusReader opens, besides lexnames.
FILES="cntlist.rev index.sense index.adj index.adv index.noun index.verb
       data.adj data.adv data.noun data.verb adj.exc adv.exc noun.exc verb.exc"

missing=""
for name in $FILES; do
  [ -f "$SOURCE/$name" ] || missing="$missing $name"
done
if [ -n "$missing" ]; then
  echo "WARNING: WordNet not installed: $SOURCE lacks$missing." >&2
  echo "  METEOR will raise ConfigError until you run (as root):" >&2
  echo "    apt-get install -y wordnet-base wordnet-sense-index && bash scripts/install_wordnet.sh $VENV" >&2
  exit 0
fi
[ -d "$VENV" ] || { echo "no virtual environment at $VENV (run scripts/install.sh first)" >&2; exit 1; }

staging="$TARGET.tmp.$$"
trap 'rm -rf "$staging"' EXIT
rm -rf "$staging"
mkdir -p "$staging"
for name in $FILES; do
  cp "$SOURCE/$name" "$staging/$name"
done

# Lexicographer file number, name, part-of-speech number (1 noun, 2 verb, 3 adjective, 4 adverb).
cat >"$staging/lexnames" <<'EOF'
00	adj.all	3
01	adj.pert	3
02	adv.all	4
03	noun.Tops	1
04	noun.act	1
05	noun.animal	1
06	noun.artifact	1
07	noun.attribute	1
08	noun.body	1
09	noun.cognition	1
10	noun.communication	1
11	noun.event	1
12	noun.feeling	1
13	noun.food	1
14	noun.group	1
15	noun.location	1
16	noun.motive	1
17	noun.object	1
18	noun.person	1
19	noun.phenomenon	1
20	noun.plant	1
21	noun.possession	1
22	noun.process	1
23	noun.quantity	1
24	noun.relation	1
25	noun.shape	1
26	noun.state	1
27	noun.substance	1
28	noun.time	1
29	verb.body	2
30	verb.change	2
31	verb.cognition	2
32	verb.communication	2
33	verb.competition	2
34	verb.consumption	2
35	verb.contact	2
36	verb.creation	2
37	verb.emotion	2
38	verb.motion	2
39	verb.perception	2
40	verb.possession	2
41	verb.social	2
42	verb.stative	2
43	verb.weather	2
44	adj.ppl	3
EOF

rm -rf "$TARGET"
mv "$staging" "$TARGET"
echo "WordNet 3.0 installed for NLTK in $TARGET"
