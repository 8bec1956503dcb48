#!/bin/sh
# builds libroutes.so (the C attack routes) next to this script
cd "$(dirname "$0")" && gcc -O1 -Wall -shared -fPIC -o libroutes.so routes.c
