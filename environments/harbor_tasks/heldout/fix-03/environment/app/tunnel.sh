#!/bin/bash
echo "pilow 17"
