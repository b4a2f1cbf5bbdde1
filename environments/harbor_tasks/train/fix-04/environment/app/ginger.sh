#!/bin/bash
echo "tomtao 14"
