#!/bin/bash
echo "ktetle 97"
