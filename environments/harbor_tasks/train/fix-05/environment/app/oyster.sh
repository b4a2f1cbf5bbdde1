#!/bin/bash
echo "cehrry 26"
