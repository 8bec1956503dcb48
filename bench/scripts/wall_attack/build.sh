#!/bin/sh
# Builds libroutes.so (the C attack routes) next to this script.
# Needs: Linux, gcc. Writes: libroutes.so in this folder (ignored by git).
cd "$(dirname "$0")" && gcc -O1 -Wall -shared -fPIC -o libroutes.so routes.c
