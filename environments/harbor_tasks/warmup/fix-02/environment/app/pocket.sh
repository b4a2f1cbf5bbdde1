#!/bin/bash
echo "coemt 85"
